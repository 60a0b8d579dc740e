/**
 * The one key order every backend lists in: Unicode code point order, which is also the byte
 * order of UTF-8 (SQLite's BINARY collation, PostgreSQL's "C" collation). JavaScript's `<`
 * compares UTF-16 code units, which disagrees for characters above U+FFFF, so in-memory code
 * compares with this instead.
 */

/** Compare two keys by code point: negative, zero or positive. */
export const compare = (a: string, b: string): number => {
  if (a === b) return 0
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i)
    let y = b.charCodeAt(i)
    if (x === y) continue
    // Surrogates (D800–DFFF) encode code points above FFFF: lift them above E000–FFFF.
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000
    }
    return x - y
  }
  return a.length - b.length
}

/** Index of the first element of sorted `keys` that is ≥ `key` (binary search). */
export const lowerBound = (keys: ReadonlyArray<string>, key: string): number => {
  let lo = 0
  let hi = keys.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (compare(keys[mid]!, key) < 0) lo = mid + 1
    else hi = mid
  }
  return lo
}
