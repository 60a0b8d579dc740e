/**
 * A live session with a process in a container (`exec` with streams, `attach`): frames on the
 * numbered channels of Kubernetes' `channel.k8s.io` protocols, the same at every hop (API server,
 * agent endpoint, kbox socket, driver), so each hop only relays frames and none re-encodes them.
 *
 *   caller ─▶ process   0 stdin bytes · 4 resize {"Width":80,"Height":24} · 255 [0] end of stdin
 *   process ─▶ caller   1 stdout · 2 stderr · then one 3 (a v1 Status: how it ended) · end
 *
 * On a WebSocket each frame is one binary message: the channel byte, then the data (v4 and v5).
 * A non-zero exit is a `Failure` Status with reason `NonZeroExitCode` and the code in a cause
 * `ExitCode`, which is where kubectl and client-go read the exit code from.
 */

/** The channel numbers. */
export const Channel = { stdin: 0, stdout: 1, stderr: 2, error: 3, resize: 4, close: 255 } as const

/** One frame. */
export interface Frame {
  readonly channel: number
  readonly data: Uint8Array
}

/** A session: frames in both directions until the process ends or the caller closes it. */
export interface StreamSession {
  /** Caller to process: stdin (0), resize (4), close (255 with data [0]: end of stdin). */
  readonly send: (frame: Frame) => void
  /** Process to caller: stdout (1), stderr (2), then one error (3) frame; then the iteration ends. */
  readonly frames: AsyncIterable<Frame>
  /** End the session; a process still running is killed. Idempotent. */
  readonly close: () => void
}

/** What to run with streams attached. */
export interface ExecStreamRequest {
  readonly command: ReadonlyArray<string>
  /** Give the command a standard input fed from channel 0 (else it reads nothing). */
  readonly stdin: boolean
  /** Run it on a pseudo-terminal (stdout and stderr are then one stream, on channel 1). */
  readonly tty: boolean
  readonly env?: Readonly<Record<string, string>> | undefined
  readonly workingDir?: string | undefined
}

/** How to attach to a container's main process. */
export interface AttachRequest {
  /** Forward channel 0 to the process's standard input (the container must have been created with `stdin`). */
  readonly stdin: boolean
  readonly tty: boolean
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** A frame as one WebSocket message: the channel byte, then the data. */
export const encode = (frame: Frame): Uint8Array => {
  const out = new Uint8Array(frame.data.length + 1)
  out[0] = frame.channel
  out.set(frame.data, 1)
  return out
}

/** A WebSocket message as a frame (`undefined` for an empty message, which carries no channel). */
export const decode = (message: Uint8Array): Frame | undefined => (message.length === 0 ? undefined : { channel: message[0]!, data: message.subarray(1) })

/** A text frame. */
export const text = (channel: number, s: string): Frame => ({ channel, data: encoder.encode(s) })

/** The end-of-stdin frame of v5 (`255` then the channel it closes). */
export const closeStdin: Frame = { channel: Channel.close, data: Uint8Array.of(Channel.stdin) }

/** A resize frame. */
export const resize = (width: number, height: number): Frame => text(Channel.resize, JSON.stringify({ Width: width, Height: height }))

/** The terminal size a resize frame carries (`undefined` if it is not one). */
export const sizeOf = (data: Uint8Array): { readonly width: number; readonly height: number } | undefined => {
  try {
    const v = JSON.parse(decoder.decode(data)) as { Width?: unknown; Height?: unknown }
    const width = Number(v.Width)
    const height = Number(v.Height)
    return Number.isInteger(width) && Number.isInteger(height) && width > 0 && height > 0 && width < 65536 && height < 65536 ? { width, height } : undefined
  } catch {
    return undefined
  }
}

/** The Status an ended process reports on channel 3. */
export const exitStatus = (exitCode: number, command: ReadonlyArray<string> = []): Record<string, unknown> =>
  exitCode === 0
    ? { metadata: {}, status: "Success" }
    : {
        metadata: {},
        status: "Failure",
        message: `command terminated with non-zero exit code: error executing command [${command.join(" ")}], exit code ${exitCode}`,
        reason: "NonZeroExitCode",
        details: { causes: [{ reason: "ExitCode", message: String(exitCode) }] }
      }

/** A failure that is not an exit code (the process could not start, the container went away). */
export const failureStatus = (message: string, code = 500): Record<string, unknown> => ({ metadata: {}, status: "Failure", message, reason: "InternalError", code })

/** The error frame of a Status. */
export const statusFrame = (status: Record<string, unknown>): Frame => text(Channel.error, JSON.stringify(status))

/**
 * How a session ended, from its error frame: the exit code (0 for Success), or the failure's
 * message when no exit code is named.
 */
export const outcomeOf = (data: Uint8Array): { readonly exitCode?: number; readonly message?: string } => {
  try {
    const s = JSON.parse(decoder.decode(data)) as { status?: unknown; message?: unknown; details?: { causes?: ReadonlyArray<{ reason?: unknown; message?: unknown }> } }
    if (s.status === "Success") return { exitCode: 0 }
    const cause = s.details?.causes?.find((c) => c.reason === "ExitCode")
    const code = Number(cause?.message)
    if (cause !== undefined && Number.isInteger(code)) return { exitCode: code }
    return { message: typeof s.message === "string" ? s.message : "the session failed" }
  } catch {
    return { message: "the session ended with an unreadable status" }
  }
}

/**
 * A push queue read as an async iterable: what every producer of frames hands its consumer.
 * Unbounded on purpose at this layer; producers pace themselves on `pending` (bytes queued).
 */
export interface FrameQueue {
  readonly push: (frame: Frame) => void
  /** No more frames; the iteration ends once the queued ones are read. Idempotent. */
  readonly end: () => void
  readonly ended: () => boolean
  /** Bytes queued and not yet read. */
  readonly pending: () => number
  /** Resolves once `pending()` is at most `bytes` (or the queue ended). */
  readonly drained: (bytes: number) => Promise<void>
  readonly frames: AsyncIterable<Frame>
}

/** A new FrameQueue. */
export const queue = (): FrameQueue => {
  const items: Array<Frame> = []
  let done = false
  let bytes = 0
  let wake: (() => void) | undefined
  const waiters: Array<{ readonly bytes: number; readonly resolve: () => void }> = []
  const notify = () => {
    const w = wake
    wake = undefined
    w?.()
  }
  const settle = () => {
    for (let i = waiters.length - 1; i >= 0; i--) {
      const w = waiters[i]!
      if (done || bytes <= w.bytes) {
        waiters.splice(i, 1)
        w.resolve()
      }
    }
  }
  return {
    push: (frame) => {
      if (done) return
      items.push(frame)
      bytes += frame.data.length
      notify()
    },
    end: () => {
      done = true
      notify()
      settle()
    },
    ended: () => done,
    pending: () => bytes,
    drained: (limit) => (done || bytes <= limit ? Promise.resolve() : new Promise((resolve) => waiters.push({ bytes: limit, resolve }))),
    frames: {
      [Symbol.asyncIterator]: () => ({
        next: async (): Promise<IteratorResult<Frame>> => {
          for (;;) {
            const item = items.shift()
            if (item !== undefined) {
              bytes -= item.data.length
              settle()
              return { done: false, value: item }
            }
            if (done) return { done: true, value: undefined }
            await new Promise<void>((resolve) => (wake = resolve))
          }
        },
        return: async (): Promise<IteratorResult<Frame>> => {
          done = true
          items.length = 0
          bytes = 0
          settle()
          return { done: true, value: undefined }
        }
      })
    }
  }
}
