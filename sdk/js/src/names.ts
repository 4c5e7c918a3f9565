// Names that are not UTF-8. A Linux file name is bytes; JSON strings are Unicode, so the daemon
// sends each byte that is not part of valid UTF-8 as a lone surrogate \udc80..\udcff (Python's
// `surrogateescape`, docs/protocol.md "Names that are not UTF-8") and reads such surrogates in a
// request back as those bytes. A name from a result can be passed back to any verb as it is; to
// open it with node:fs, turn it into its bytes first (fs accepts a Buffer as a path).

/** The bytes a name stands for: \udc80..\udcff are those bytes, the rest is UTF-8. */
export function nameToBytes(name: string): Buffer {
  const parts: Buffer[] = [];
  let run = "";
  for (const ch of name) {
    const cp = ch.codePointAt(0) as number;
    if (cp >= 0xdc80 && cp <= 0xdcff) {
      if (run) parts.push(Buffer.from(run, "utf8"));
      run = "";
      parts.push(Buffer.of(cp - 0xdc00));
    } else {
      run += ch;
    }
  }
  if (run) parts.push(Buffer.from(run, "utf8"));
  return Buffer.concat(parts);
}

/** The name for bytes as the daemon writes it: valid UTF-8 as text, other bytes as \udcXX. */
export function nameFromBytes(bytes: Uint8Array): string {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let out = "";
  let i = 0;
  while (i < b.length) {
    const n = utf8Len(b, i);
    if (n === 0) {
      out += String.fromCharCode(0xdc00 + b[i]);
      i += 1;
    } else {
      out += b.toString("utf8", i, i + n);
      i += n;
    }
  }
  return out;
}

// Length of the valid UTF-8 sequence (RFC 3629) at b[i], 0 when there is none.
function utf8Len(b: Buffer, i: number): number {
  const c = b[i];
  const left = b.length - i;
  const cont = (k: number) => (b[i + k] & 0xc0) === 0x80;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) return left >= 2 && cont(1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    if (left < 3 || !cont(1) || !cont(2)) return 0;
    if (c === 0xe0 && b[i + 1] < 0xa0) return 0;
    if (c === 0xed && b[i + 1] >= 0xa0) return 0;
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    if (left < 4 || !cont(1) || !cont(2) || !cont(3)) return 0;
    if (c === 0xf0 && b[i + 1] < 0x90) return 0;
    if (c === 0xf4 && b[i + 1] >= 0x90) return 0;
    return 4;
  }
  return 0;
}
