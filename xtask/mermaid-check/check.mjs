// Parse each mermaid file given on the command line; exit 1 if any fails.
import { JSDOM } from 'jsdom';
const dom = new JSDOM('<!doctype html><html><body></body></html>');
globalThis.window = dom.window; globalThis.document = dom.window.document;
globalThis.DOMParser = dom.window.DOMParser;
const { default: mermaid } = await import('mermaid');
import fs from 'fs';
let bad = 0;
for (const f of process.argv.slice(2)) {
  const text = fs.readFileSync(f, 'utf8');
  try { await mermaid.parse(text); console.log('ok', f); }
  catch (e) { bad++; console.log('FAIL', f, String(e.message || e).slice(0, 400)); }
}
process.exit(bad ? 1 : 0);
