-- Run by tests/lsp_nvim.rs in headless Neovim (0.7+): attach `tapc lsp` to a file, wait for
-- its diagnostics and write them as JSON. _G.TAPC, _G.FILE and _G.OUT are set by the test.
local client = vim.lsp.start_client({
  cmd = { _G.TAPC, 'lsp' },
  name = 'tapc',
  root_dir = vim.fn.fnamemodify(_G.FILE, ':h'),
})
vim.cmd('edit ' .. vim.fn.fnameescape(_G.FILE))
vim.lsp.buf_attach_client(0, client)
-- The server publishes all of a file's diagnostics in one notification.
local arrived = vim.wait(30000, function() return #vim.diagnostic.get(0) > 0 end, 50)
local found = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  local lsp = (d.user_data or {}).lsp or {}
  table.insert(found, {
    line = d.lnum + 1,
    col = d.col + 1,
    code = d.code or lsp.code,
    source = d.source,
    message = d.message,
  })
end
vim.lsp.stop_client(client)
local stopped = vim.wait(10000, function() return vim.lsp.client_is_stopped(client) end, 50)
vim.fn.writefile({ vim.fn.json_encode({ arrived = arrived, stopped = stopped, diagnostics = found }) }, _G.OUT)
vim.cmd('qa!')
