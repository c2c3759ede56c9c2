-- Run by tests/lsp/lsp_nvim.rs before each test script: starts `tapc lsp` (_G.TAPC), opens
-- _G.FILE and attaches the server to its buffer; the client is _G.CLIENT.
_G.CLIENT = vim.lsp.start_client({
  cmd = { _G.TAPC, 'lsp' },
  name = 'tapc',
  root_dir = vim.fn.fnamemodify(_G.FILE, ':h'),
})
vim.cmd('edit ' .. vim.fn.fnameescape(_G.FILE))
vim.lsp.buf_attach_client(0, _G.CLIENT)
