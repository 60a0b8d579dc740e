/**
 * A container's output: the box reads the shim's FIFOs and appends each line to
 * `container.log` in the CRI format (`<RFC 3339 time> <stdout|stderr> <F|P> <text>`, F a full
 * line, P a part of a longer one), rotated by size into `container.log.1`, `.2`, ... Reading
 * answers tail/since from those files; following gets live lines from the writer, so a follower
 * never polls the disk.
 */
import { closeSync, constants, openSync, readFileSync, readSync, renameSync, rmSync, statSync, writeSync } from "node:fs"
import { Socket } from "node:net"
import { join } from "node:path"
import { StringDecoder } from "node:string_decoder"
import type { Runtime } from "@koder/fleet-core"

/** One stored line. */
export interface Line {
  /** Milliseconds since the epoch. */
  readonly at: number
  readonly stream: "stdout" | "stderr"
  /** The text, with its `\n` when the line is complete. */
  readonly line: string
}

/** Rotation settings. */
export interface Rotation {
  /** Rotate `container.log` once it exceeds this size. */
  readonly maxBytes: number
  /** Rotated files kept besides the current one. */
  readonly maxFiles: number
}

/** A line longer than this is stored in parts (tag P), so one runaway line cannot eat memory. */
const maxLine = 16 * 1024

const file = (dir: string, n: number) => join(dir, n === 0 ? "container.log" : `container.log.${n}`)

/** Format one stored line. */
export const formatLine = (l: Line): string =>
  `${new Date(l.at).toISOString()} ${l.stream} ${l.line.endsWith("\n") ? "F" : "P"} ${l.line.endsWith("\n") ? l.line : `${l.line}\n`}`

/** Parse one stored line (without its trailing newline); `undefined` for a malformed one. */
export const parseLine = (text: string): Line | undefined => {
  const a = text.indexOf(" ")
  const b = text.indexOf(" ", a + 1)
  const c = text.indexOf(" ", b + 1)
  if (a < 0 || b < 0 || c < 0) return undefined
  const at = Date.parse(text.slice(0, a))
  const stream = text.slice(a + 1, b)
  const tag = text.slice(b + 1, c)
  if (Number.isNaN(at) || (stream !== "stdout" && stream !== "stderr")) return undefined
  const body = text.slice(c + 1)
  return { at, stream, line: tag === "P" ? body : `${body}\n` }
}

/** The lines kept on disk, oldest first, filtered as the options say. */
export const read = (dir: string, rotation: Rotation, options: Runtime.LogOptions, now: number): Array<Line> => {
  const out: Array<Line> = []
  for (let n = rotation.maxFiles; n >= 0; n--) {
    let text: string
    try {
      text = readFileSync(file(dir, n), "utf8")
    } catch {
      continue
    }
    for (const raw of text.split("\n")) {
      if (raw === "") continue
      const l = parseLine(raw)
      if (l !== undefined) out.push(l)
    }
  }
  return select(out, options, now)
}

/** Apply `sinceSeconds` then `tailLines`. */
export const select = (lines: ReadonlyArray<Line>, options: Runtime.LogOptions, now: number): Array<Line> => {
  const since = options.sinceSeconds === undefined ? -Infinity : now - options.sinceSeconds * 1000
  let out = lines.filter((l) => l.at >= since)
  if (options.tailLines !== undefined) out = options.tailLines <= 0 ? [] : out.slice(-options.tailLines)
  return out
}

/** The port's chunk for a stored line. */
export const toChunk = (l: Line, timestamps: boolean): Runtime.LogChunk =>
  timestamps ? { stream: l.stream, line: l.line, timestamp: new Date(l.at).toISOString() } : { stream: l.stream, line: l.line }

/**
 * Appends a running container's output to its log and tells listeners. One per running
 * container while the box runs; a new box re-attaches to the FIFOs of the containers it adopts.
 */
export class Writer {
  /** The log file, opened at the first output (a quiet container never creates one). */
  private fd: number | undefined
  private size = 0
  private readonly listeners = new Set<(l: Line) => void>()
  private readonly sockets: Array<Socket> = []
  /** Per stream: the decoder (a UTF-8 character may span reads) and the unfinished line. */
  private readonly partial = {
    stdout: { decoder: new StringDecoder("utf8"), pending: "" },
    stderr: { decoder: new StringDecoder("utf8"), pending: "" }
  }
  private ended: Promise<void> = Promise.resolve()

  constructor(
    /** Where the log files are. */
    private readonly dir: string,
    private readonly rotation: Rotation,
    /** Where the container's `stdout.fifo` and `stderr.fifo` are (default: `dir`). */
    private readonly fifoDir: string = dir
  ) {}

  private open(): number {
    if (this.fd === undefined) {
      this.fd = openSync(file(this.dir, 0), "a", 0o600)
      this.size = statSync(file(this.dir, 0)).size
    }
    return this.fd
  }

  /**
   * Start reading the two FIFOs; the returned promise settles when both reached end of file.
   * That end is not guaranteed: Linux reports a FIFO's hang-up only to readers that saw a writer,
   * so a box attaching after the shim ended never gets it. `drainNow` is the sure way to the end.
   */
  attach(options: { readonly holdOpen?: boolean } = {}): Promise<void> {
    const ends = (["stdout", "stderr"] as const).map((stream) => {
      // Non-blocking, through libuv's pipe handle: a blocking read would hold a thread-pool
      // thread per container. The shim holds the write side, so there is no early EOF. With
      // `holdOpen` (attached before the shim starts) the box holds a write side too: the pipe and
      // what a quick workload wrote into it outlive the shim until the box has read it (the end
      // then comes from the container's `exit` file and `drainNow`, not from end of file).
      const flags = options.holdOpen === true ? constants.O_RDWR : constants.O_RDONLY
      const fd = openSync(join(this.fifoDir, `${stream}.fifo`), flags | constants.O_NONBLOCK)
      const socket = new Socket({ fd, readable: true, writable: false })
      this.sockets.push(socket)
      return new Promise<void>((resolve) => {
        socket.on("data", (data: Buffer) => this.feed(stream, data, false))
        const finish = () => {
          this.feed(stream, Buffer.alloc(0), true)
          resolve()
        }
        socket.once("end", finish)
        socket.once("error", finish)
        socket.once("close", () => resolve())
      })
    })
    this.ended = Promise.all(ends).then(() => undefined)
    return this.ended
  }

  private feed(stream: "stdout" | "stderr", data: Buffer, atEnd: boolean) {
    const p = this.partial[stream]
    p.pending += p.decoder.write(data)
    if (atEnd) p.pending += p.decoder.end()
    p.pending = this.consume(stream, p.pending, atEnd)
  }

  /**
   * Read what is left in the FIFOs now, without waiting for events, and flush unfinished lines.
   * For a container whose processes are all gone: nothing more can be written.
   */
  drainNow(): void {
    const buf = Buffer.alloc(64 * 1024)
    for (const stream of ["stdout", "stderr"] as const) {
      let fd: number | undefined
      try {
        fd = openSync(join(this.fifoDir, `${stream}.fifo`), constants.O_RDONLY | constants.O_NONBLOCK)
        for (;;) {
          const n = readSync(fd, buf, 0, buf.length, null)
          if (n <= 0) break
          this.feed(stream, buf.subarray(0, n), false)
        }
      } catch {
        // EAGAIN: empty with a writer left; or no FIFO
      } finally {
        if (fd !== undefined) closeSync(fd)
      }
      this.feed(stream, Buffer.alloc(0), true)
    }
  }

  /** Write complete lines of `text`; return the unfinished rest (or flush it at end). */
  private consume(stream: "stdout" | "stderr", text: string, atEnd: boolean): string {
    const now = Date.now()
    const lines: Array<Line> = []
    let start = 0
    for (;;) {
      const nl = text.indexOf("\n", start)
      if (nl < 0) break
      // A line longer than maxLine goes in P parts, then its F end.
      for (let i = start; nl - i > maxLine; i += maxLine) {
        lines.push({ at: now, stream, line: text.slice(i, i + maxLine) })
        start = i + maxLine
      }
      lines.push({ at: now, stream, line: text.slice(start, nl + 1) })
      start = nl + 1
    }
    let rest = text.slice(start)
    while (rest.length > maxLine) {
      lines.push({ at: now, stream, line: rest.slice(0, maxLine) })
      rest = rest.slice(maxLine)
    }
    if (atEnd && rest !== "") {
      lines.push({ at: now, stream, line: rest })
      rest = ""
    }
    if (lines.length > 0) this.append(lines)
    return rest
  }

  private append(lines: ReadonlyArray<Line>): void {
    this.open()
    // Line by line against the limit, so no file outgrows it (unless one line alone does).
    let batch: Array<Buffer> = []
    let batchSize = 0
    const flush = () => {
      if (batchSize === 0) return
      writeSync(this.open(), batch.length === 1 ? batch[0]! : Buffer.concat(batch, batchSize))
      this.size += batchSize
      batch = []
      batchSize = 0
    }
    for (const l of lines) {
      const data = Buffer.from(formatLine(l))
      if (this.size + batchSize > 0 && this.size + batchSize + data.length > this.rotation.maxBytes) {
        flush()
        this.rotate()
      }
      batch.push(data)
      batchSize += data.length
    }
    flush()
    for (const l of lines) for (const f of this.listeners) f(l)
  }

  private rotate(): void {
    if (this.fd !== undefined) closeSync(this.fd)
    rmSync(file(this.dir, this.rotation.maxFiles), { force: true })
    for (let n = this.rotation.maxFiles - 1; n >= 0; n--) {
      try {
        renameSync(file(this.dir, n), file(this.dir, n + 1))
      } catch {
        // not there yet
      }
    }
    if (this.rotation.maxFiles === 0) rmSync(file(this.dir, 0), { force: true })
    this.fd = openSync(file(this.dir, 0), "a", 0o600)
    this.size = 0
  }

  /** Listen to new lines; returns the unsubscribe. */
  listen(f: (l: Line) => void): () => void {
    this.listeners.add(f)
    return () => void this.listeners.delete(f)
  }

  /** Stop reading and close the log file. */
  close(): void {
    for (const s of this.sockets) s.destroy()
    this.sockets.length = 0
    this.listeners.clear()
    try {
      if (this.fd !== undefined) closeSync(this.fd)
    } catch {
      // closed
    }
    this.fd = undefined
  }
}
