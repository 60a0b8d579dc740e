/**
 * FIFOs made ahead for container output. Each container's shim needs two FIFOs in its directory
 * (see Shim), and making them took one `mkfifo` program per container: on the hosts this runs on
 * (VMs), starting any program costs about a millisecond of CPU, the largest part of a start that
 * is not the workload's. The pool makes them in batches, one `mkfifo` for many, through the
 * launcher, in a directory of the box's run directory (the same filesystem as the containers' run
 * directories: a FIFO moves into one by a rename). When the pool is empty the shim makes its own, as before.
 *
 *   take(dir) ─▶ rename two pooled FIFOs to dir/stdout.fifo, dir/stderr.fifo ─▶ below the low mark: refill
 *   refill ─▶ launch file: `mkfifo f1 … fN` ─▶ answer ─▶ pooled
 */
import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { unlink } from "node:fs/promises"
import { join } from "node:path"
import { type Launcher, quote } from "./Launcher.js"

/** FIFO pairs made per refill, and the count below which a refill starts. */
const batch = 32
const lowMark = 16

/** A pool of FIFOs in `dir` (emptied and created anew), made by `mkfifo` through `launcher`. */
export class FifoPool {
  private readonly ready: Array<string> = []
  private refilling: Promise<void> | undefined = undefined
  private seq = 0

  constructor(
    private readonly dir: string,
    private readonly mkfifo: string,
    private readonly launcher: Launcher,
    /** Where the refill's launch file goes. */
    private readonly launchDir: string
  ) {
    // What a previous box left in the pool was never handed out.
    rmSync(dir, { recursive: true, force: true })
    mkdirSync(dir, { recursive: true, mode: 0o700 })
  }

  /**
   * Move two FIFOs into `containerDir` as `stdout.fifo` and `stderr.fifo`, waiting for a refill
   * when the pool is empty (the box reads a container's FIFOs from before its start only when they
   * come from here); false when none could be made (the shim then makes them).
   */
  async take(containerDir: string): Promise<boolean> {
    if (this.ready.length < 2) {
      this.refill()
      await this.refilling
    }
    return this.takeNow(containerDir)
  }

  /** As `take`, without waiting: false when the pool has none now. Starts a refill when it runs low. */
  takeNow(containerDir: string): boolean {
    let taken = false
    if (this.ready.length >= 2) {
      const out = this.ready.pop()!
      const err = this.ready.pop()!
      try {
        renameSync(out, join(containerDir, "stdout.fifo"))
        renameSync(err, join(containerDir, "stderr.fifo"))
        taken = true
      } catch {
        // The pool was emptied meanwhile: the shim makes them.
      }
    }
    if (this.ready.length < lowMark * 2) this.refill()
    return taken
  }

  private refill(): void {
    if (this.refilling !== undefined) return
    const names = Array.from({ length: batch * 2 }, () => join(this.dir, `f${(this.seq++).toString(36)}`))
    const file = join(this.launchDir, `fifos-${this.seq.toString(36)}.launch`)
    this.refilling = (async () => {
      try {
        writeFileSync(file, `${quote(this.mkfifo)} ${names.map(quote).join(" ")} && echo "$1 ok" || echo "$1 failed"\n`, { mode: 0o600 })
        const answer = await this.launcher.run(file)
        if (answer?.[0] === "ok") this.ready.push(...names)
      } catch {
        // No pool this time: shims make their own FIFOs.
      } finally {
        await unlink(file).catch(() => undefined)
        this.refilling = undefined
      }
    })()
  }

  /** Remove the FIFOs not handed out (the box is closing; the next one makes its own). */
  close(): void {
    this.ready.length = 0
    rmSync(this.dir, { recursive: true, force: true })
  }
}
