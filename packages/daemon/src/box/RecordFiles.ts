/**
 * The box's records on disk: JSON files written so that a crash never leaves half of one, the
 * data dir's lock (one box per data dir), and the writer that keeps one write at a time per record.
 * Both drivers keep their sandboxes and containers this way.
 */
import { readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { rename, writeFile } from "node:fs/promises"
import { join } from "node:path"
import { Runtime } from "@koder/fleet-core"
import * as Procfs from "./Procfs.js"

/** A file's text; undefined when it cannot be read. */
export const readText = (path: string): string | undefined => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return undefined
  }
}

// Temporary siblings are named by this process and a counter: one box per data dir (its lock),
// and no random bytes to draw for each of a pod start's several writes.
let tmpSeq = 0
const tmpOf = (path: string) => `${path}.${process.pid}-${(tmpSeq++).toString(36)}.tmp`

/** Write a file atomically (sibling, then rename): a crash never leaves half a record. */
export const writeTextSync = (path: string, text: string): void => {
  const tmp = tmpOf(path)
  writeFileSync(tmp, text, { mode: 0o600 })
  renameSync(tmp, path)
}

/** Write a value as JSON, atomically. */
export const writeJson = (path: string, value: unknown): void => writeTextSync(path, JSON.stringify(value))

/** Write a file atomically, off the event loop. */
export const writeAtomic = async (path: string, text: string): Promise<void> => {
  const tmp = tmpOf(path)
  await writeFile(tmp, text, { mode: 0o600 })
  await rename(tmp, path)
}

/** One write(2) of at most a page at offset 0 is never torn by the writer dying part way. */
const pageBytes = 4096

/**
 * Write a record file (JSON); returns its size now. Records of a page or less are written on the
 * calling thread: a write of a few hundred bytes into the page cache costs less than the thread
 * pool's open, write and close round trips, each a wake-up of another thread (interleaved bursts
 * of 100 pod starts: p99 1.09–1.12 s against 1.38–1.51 s, V8's and libuv's threads' CPU 0.65–0.86
 * s against 0.97–1.18 s, in 3 of 4 pairs; the 4th was noise). A file this box wrote
 * before (`size` known) is rewritten in place, in one write of the text padded with spaces to the
 * file's size (JSON ignores trailing whitespace), so it always holds one whole record, the old or
 * the new; a new file is created with the text. Only a record larger than a page, or a file of
 * unknown size (one a previous box wrote), goes through a temporary sibling and a rename. Why:
 * creating files is what a pod start spent most on here (ext4 without a journal checks each new
 * inode against the recently deleted ones, and every rename over a record deletes one).
 */
export const writeRecord = async (path: string, text: string, size: number | undefined): Promise<number> => {
  const bytes = Buffer.byteLength(text)
  if (size !== undefined && Math.max(size, bytes) <= pageBytes) {
    writeFileSync(path, size > bytes ? text + " ".repeat(size - bytes) : text, { flag: "r+" })
    return Math.max(size, bytes)
  }
  if (size === undefined && bytes <= pageBytes) {
    try {
      writeFileSync(path, text, { flag: "wx", mode: 0o600 })
      return bytes
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
    }
  }
  await writeAtomic(path, text)
  return bytes
}

/**
 * Writes records (see writeRecord), one write at a time per path, with the record as it was when
 * `persist` was called; the promise settles once that text (or a newer one) is on disk. Records
 * asked for while a write is in flight (a record over a page goes through the thread pool) are not
 * all written: only the newest, after it.
 */
export class RecordWriter {
  /** Records being written, by path: the newest text not yet on disk, and when it will be. */
  private readonly writing = new Map<string, { text: string | undefined; readonly done: Promise<void> }>()
  /** Sizes of the record files this box wrote (rewritten in place: see writeRecord). */
  private readonly sizes = new Map<string, number>()

  /** Write `text` to `path` after the writes in flight there. */
  persist(path: string, text: string): Promise<void> {
    const pending = this.writing.get(path)
    if (pending !== undefined) {
      pending.text = text
      return pending.done
    }
    const slot: { text: string | undefined; done: Promise<void> } = { text, done: Promise.resolve() }
    this.writing.set(path, slot)
    slot.done = (async () => {
      while (slot.text !== undefined) {
        const next = slot.text
        slot.text = undefined
        try {
          this.sizes.set(path, await writeRecord(path, next, this.sizes.get(path)))
        } catch {
          // The record was removed meanwhile (its directory is gone): nothing to keep.
          this.sizes.delete(path)
        }
      }
      this.writing.delete(path)
    })()
    return slot.done
  }

  /** Remove a record file once the writes in flight are done (one would bring it back). */
  async remove(path: string): Promise<void> {
    await this.flushed(path)
    rmSync(path, { force: true })
    this.sizes.delete(path)
  }

  /** Settles once no write of `path` is in flight. */
  flushed(path: string): Promise<void> {
    return this.writing.get(path)?.done ?? Promise.resolve()
  }

  /** Forget a record whose file went with its directory. */
  forget(path: string): void {
    this.sizes.delete(path)
  }
}

/** Every `*.json` record in `dir` (unreadable ones are skipped: they are written by a rename, never torn). */
export const loadRecords = <R>(dir: string): Array<R> => {
  const out: Array<R> = []
  for (const name of readdirSync(dir)) {
    if (!name.endsWith(".json")) continue
    try {
      out.push(JSON.parse(readFileSync(join(dir, name), "utf8")) as R)
    } catch {
      // unreadable: skipped
    }
  }
  return out
}

/**
 * Take the data dir's lock (`box.pid`): one box per data dir, whatever its driver; two would each
 * adopt, and then duplicate, the same containers.
 */
export const lockDataDir = (dataDir: string): void => {
  const file = join(dataDir, "box.pid")
  const [pid, start] = (readText(file) ?? "").trim().split(" ").map(Number)
  if (pid !== undefined && pid !== process.pid && Procfs.isAlive(pid, start))
    throw new Runtime.Unavailable({ message: `another box (pid ${pid}) serves ${dataDir}` })
  const self = Procfs.stat(process.pid)
  const tmp = `${file}.${process.pid}.tmp`
  writeFileSync(tmp, `${process.pid} ${self?.startTime ?? 0}\n`, { mode: 0o600 })
  renameSync(tmp, file)
}

/** Let go of the data dir's lock if this process holds it. */
export const unlockDataDir = (dataDir: string): void => {
  const file = join(dataDir, "box.pid")
  if ((readText(file) ?? "").startsWith(`${process.pid} `)) rmSync(file, { force: true })
}
