-- Run by tests/lsp/lsp_nvim.rs in headless Neovim (0.7+): attach `tapc lsp` to a file, wait for
-- its diagnostics and write them as JSON. _G.TAPC, _G.FILE and _G.OUT are set by the test.
-- nvim_attach.lua ran first: the buffer of _G.FILE is attached to `tapc lsp` (_G.CLIENT).
local client = _G.CLIENT
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
