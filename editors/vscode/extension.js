// The whole client: start `tapc lsp` for .teg files (vscode-languageclient does the rest).
const vscode = require('vscode');
const { LanguageClient } = require('vscode-languageclient/node');

let client;

function activate() {
  const command = vscode.workspace.getConfiguration('teg').get('server.path', 'tapc');
  client = new LanguageClient(
    'tapc',
    'tapc lsp',
    { command, args: ['lsp'] },
    { documentSelector: [{ language: 'teg' }] }
  );
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
