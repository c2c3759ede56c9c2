-- Run by tests/lsp/lsp_nvim.rs in headless Neovim (0.7+): attach `tapc lsp` to a file that
-- compiles, ask for completion after `apply @`, format the buffer, and write the completion
-- labels and details and the formatted lines as JSON. _G.TAPC, _G.FILE, _G.OUT, _G.LINE and
-- _G.COL (0-based) are set by the test.
-- nvim_attach.lua ran first: the buffer of _G.FILE is attached to `tapc lsp` (_G.CLIENT).
local client = _G.CLIENT
local ready = vim.wait(30000, function()
  local c = vim.lsp.get_client_by_id(client)
  return c ~= nil and c.initialized == true and c.server_capabilities ~= nil
end, 50)
local params = {
  textDocument = vim.lsp.util.make_text_document_params(),
  position = { line = _G.LINE, character = _G.COL },
}
local responses = vim.lsp.buf_request_sync(0, 'textDocument/completion', params, 30000) or {}
local items = {}
for _, r in pairs(responses) do
  for _, item in ipairs((r or {}).result or {}) do
    table.insert(items, { label = item.label, detail = item.detail })
  end
end
vim.lsp.buf.formatting_sync(nil, 30000)
local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
vim.lsp.stop_client(client)
local stopped = vim.wait(10000, function() return vim.lsp.client_is_stopped(client) end, 50)
vim.fn.writefile({ vim.fn.json_encode({
  ready = ready, stopped = stopped, completion = items, lines = lines,
}) }, _G.OUT)
vim.cmd('qa!')
