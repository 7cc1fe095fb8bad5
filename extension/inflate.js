// nbgrad: a panel's `content` (its tabs' HTML and its graph's details: JSON, raw-deflated, in
// base64 after the inflated length and a comma) read synchronously, so a view draws its content
// the moment it is rendered, as it did when `tabs` and `graph` were synced as themselves (an
// asynchronous DecompressionStream let the first draw race the content: empty Graph tabs after
// Run All). RFC 1951 inflate after Jorgen Ibsen's tinf (zlib licence). Prepended to panel.js.

const nbgradZ = (() => {
  const lenBits = new Uint8Array(30), lenBase = new Uint16Array(30);
  const distBits = new Uint8Array(30), distBase = new Uint16Array(30);
  function bitsBase(bits, base, delta, first) {
    for (let i = 0; i < delta; ++i) bits[i] = 0;
    for (let i = 0; i < 30 - delta; ++i) bits[i + delta] = (i / delta) | 0;
    for (let i = 0, sum = first; i < 30; ++i) { base[i] = sum; sum += 1 << bits[i]; }
  }
  bitsBase(lenBits, lenBase, 4, 3);
  bitsBase(distBits, distBase, 2, 1);
  lenBits[28] = 0;
  lenBase[28] = 258;
  const tree = () => ({ table: new Uint16Array(16), trans: new Uint16Array(288) });
  const offs = new Uint16Array(16);
  function build(t, lengths, off, num) {
    t.table.fill(0);
    for (let i = 0; i < num; ++i) t.table[lengths[off + i]]++;
    t.table[0] = 0;
    for (let i = 0, sum = 0; i < 16; ++i) { offs[i] = sum; sum += t.table[i]; }
    for (let i = 0; i < num; ++i) if (lengths[off + i]) t.trans[offs[lengths[off + i]]++] = i;
  }
  const fixedL = tree(), fixedD = tree();
  {
    const l = new Uint8Array(320);
    l.fill(8, 0, 144); l.fill(9, 144, 256); l.fill(7, 256, 280); l.fill(8, 280, 288);
    build(fixedL, l, 0, 288);
    l.fill(5, 288, 320);
    build(fixedD, l, 288, 30);
  }
  const order = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];

  return function inflate(src, size) {
    const out = new Uint8Array(size);
    let pos = 0, tag = 0, count = 0, n = 0;
    function bits(num, base) {
      if (!num) return base;
      while (count < 24) { tag |= (src[pos++] | 0) << count; count += 8; }
      const v = tag & (0xffff >>> (16 - num));
      tag >>>= num; count -= num;
      return v + base;
    }
    function symbol(t) {
      while (count < 24) { tag |= (src[pos++] | 0) << count; count += 8; }
      let sum = 0, cur = 0, len = 0;
      do {
        cur = 2 * cur + (tag & 1); tag >>>= 1; ++len;
        if (len > 15) throw new Error("nbgrad: bad deflate data");
        sum += t.table[len]; cur -= t.table[len];
      } while (cur >= 0);
      count -= len;
      return t.trans[sum + cur];
    }
    function block(lt, dt) {
      for (;;) {
        let sym = symbol(lt);
        if (sym === 256) return;
        if (sym < 256) { out[n++] = sym; continue; }
        sym -= 257;
        const length = bits(lenBits[sym], lenBase[sym]);
        const d = symbol(dt);
        const from = n - bits(distBits[d], distBase[d]);
        if (from < 0 || n + length > size) throw new Error("nbgrad: bad deflate data");
        for (let i = from; i < from + length; ++i) out[n++] = out[i];
      }
    }
    const lengths = new Uint8Array(288 + 32), lt = tree(), dt = tree(), ct = tree();
    let last = 0;
    do {
      last = bits(1, 0);
      const type = bits(2, 0);
      if (type === 0) {  // stored: back to the byte boundary (whole bytes read ahead return)
        while (count >= 8) { pos--; count -= 8; }
        count = 0; tag = 0;
        const len = src[pos] | (src[pos + 1] << 8);
        pos += 4;
        out.set(src.subarray(pos, pos + len), n);
        n += len; pos += len;
      } else if (type === 1) {
        block(fixedL, fixedD);
      } else if (type === 2) {
        const hlit = bits(5, 257), hdist = bits(5, 1), hclen = bits(4, 4);
        lengths.fill(0, 0, 19);
        for (let i = 0; i < hclen; ++i) lengths[order[i]] = bits(3, 0);
        build(ct, lengths, 0, 19);
        for (let num = 0; num < hlit + hdist;) {
          const sym = symbol(ct);
          if (sym === 16) { const p = lengths[num - 1]; for (let k = bits(2, 3); k; --k) lengths[num++] = p; }
          else if (sym === 17) for (let k = bits(3, 3); k; --k) lengths[num++] = 0;
          else if (sym === 18) for (let k = bits(7, 11); k; --k) lengths[num++] = 0;
          else lengths[num++] = sym;
        }
        build(lt, lengths, 0, hlit);
        build(dt, lengths, hlit, hdist);
        block(lt, dt);
      } else {
        throw new Error("nbgrad: bad deflate data");
      }
    } while (!last);
    if (n !== size) throw new Error("nbgrad: bad deflate data");
    return out;
  };
})();

const nbgradUnpacked = new Map(); // content string -> {tabs, graph} (the newest 16)

// `{tabs, graph}` of a `content` string (empty for a retired panel's "").
function nbgradUnpack(raw) {
  if (!raw) return { tabs: {}, graph: "{}" };
  let c = nbgradUnpacked.get(raw);
  if (!c) {
    const comma = raw.indexOf(",");
    const bin = atob(raw.slice(comma + 1));
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; ++i) bytes[i] = bin.charCodeAt(i);
    c = JSON.parse(new TextDecoder().decode(nbgradZ(bytes, Number(raw.slice(0, comma)))));
    nbgradUnpacked.set(raw, c);
    while (nbgradUnpacked.size > 16) nbgradUnpacked.delete(nbgradUnpacked.keys().next().value);
  }
  return c;
}
