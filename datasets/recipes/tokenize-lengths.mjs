// tokenize-lengths.mjs: prints the token count of each file named on stdin, one per line, in
// input order. Called by datasets/recipes/linux-kernel.sh; the counts become the measured
// balplan datasets (datasets/README.md).
//
// Usage: node tokenize-lengths.mjs ENCODING < list   (list: NUL-separated paths)
//        ENCODING is cl100k_base or o200k_base.
//
// Why it is written this way:
// - The tokenizer is the npm package gpt-tokenizer, pinned in package.json, whose BPE ranks
//   ship inside the package, so nothing needs the network. To prove it, every way out of the
//   process (sockets, DNS, fetch) is replaced before the tokenizer loads: a request at run time
//   fails loudly instead of happening quietly.
// - Files are decoded as UTF-8 with U+FFFD for invalid bytes (the recipe has already dropped
//   files holding a NUL byte), and special-token text such as "<|endoftext|>" is counted as
//   ordinary text, the way a training pipeline that tokenizes raw documents sees it.
// - Counts go to stdout in order, so the output is byte-identical from run to run.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import dns from 'node:dns';

const deny = (what) => () => {
	throw new Error(`network access attempted (${what}): the recipe must run offline`);
};
net.Socket.prototype.connect = deny('socket connect');
net.connect = deny('net.connect');
net.createConnection = deny('net.createConnection');
dns.lookup = deny('dns.lookup');
dns.resolve = deny('dns.resolve');
globalThis.fetch = deny('fetch');

const encoding = process.argv[2];
if (encoding !== 'cl100k_base' && encoding !== 'o200k_base') {
	process.stderr.write(`tokenize-lengths: error: unknown encoding '${encoding ?? ''}' ` +
			     '(cl100k_base or o200k_base)\n');
	process.exit(2);
}
const tok = await import(`gpt-tokenizer/encoding/${encoding}`);
const opts = { disallowedSpecial: new Set() }; // special-token text is plain text here

const list = readFileSync(0);
const decoder = new TextDecoder('utf-8', { fatal: false });
const out = [];
let start = 0;
for (let i = 0; i <= list.length; i++) {
	if (i < list.length && list[i] !== 0)
		continue;
	if (i > start) {
		const path = decoder.decode(list.subarray(start, i));
		const text = decoder.decode(readFileSync(path));
		out.push(String(tok.encode(text, opts).length));
		if (out.length % 1000 === 0)
			process.stderr.write(`tokenize-lengths: ${out.length} files\n`);
	}
	start = i + 1;
}
process.stdout.write(out.length ? out.join('\n') + '\n' : '');
