/**
 * A binary min-heap whose items know their position, so any item can be removed or re-ordered in
 * O(log n) — what activeQ and backoffQ need when a queued pod is updated or deleted (upstream's
 * `heap.Heap` keyed by pod).
 */

/** An item a heap holds: its position (`-1` when in none). */
export interface Indexed {
  index: number
}

/** A binary min-heap ordered by `before`. */
export class Heap<E extends Indexed> {
  readonly items: Array<E> = []
  constructor(private readonly before: (a: E, b: E) => boolean) {}
  get size() {
    return this.items.length
  }
  peek(): E | undefined {
    return this.items[0]
  }
  push(e: E) {
    e.index = this.items.length
    this.items.push(e)
    this.up(e.index)
  }
  pop(): E | undefined {
    const top = this.items[0]
    if (top !== undefined) this.remove(top)
    return top
  }
  remove(e: E) {
    const i = e.index
    const last = this.items.pop()!
    if (i < this.items.length) {
      this.items[i] = last
      last.index = i
      this.down(i)
      this.up(last.index)
    }
    e.index = -1
  }
  /** Restore the order after `e`'s key changed. */
  fix(e: E) {
    this.down(e.index)
    this.up(e.index)
  }
  private swap(i: number, j: number) {
    const a = this.items[i]!
    const b = this.items[j]!
    this.items[i] = b
    this.items[j] = a
    a.index = j
    b.index = i
  }
  private up(i: number) {
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!this.before(this.items[i]!, this.items[parent]!)) return
      this.swap(i, parent)
      i = parent
    }
  }
  private down(i: number) {
    const n = this.items.length
    for (;;) {
      const l = 2 * i + 1
      const r = l + 1
      let best = i
      if (l < n && this.before(this.items[l]!, this.items[best]!)) best = l
      if (r < n && this.before(this.items[r]!, this.items[best]!)) best = r
      if (best === i) return
      this.swap(i, best)
      i = best
    }
  }
}
