/**
 * Frames of a `StreamSession` carried on a WebSocket, one binary message per frame
 * (`StreamSession.encode`): the kbox socket's exec and attach streams, and every hop of the
 * daemon's between the API server and a node. Both ends pace themselves: a reader that falls
 * behind pauses the sender's socket, a sender waits for its own buffer to drain.
 */
import { StreamSession } from "@koder/fleet-core"
import type { Socket } from "node:net"
import WebSocket from "ws"

/** Bytes queued (either way) before the other side is paused. */
export const highWater = 1 << 20

/** Items arriving from a callback-driven source, read as an async iterable (with pause/resume on a high water mark). */
export const inbox = <A>(pause: () => void, resume: () => void) => {
  const items: Array<A> = []
  let bytes = 0
  let done = false
  let wake: (() => void) | undefined
  const notify = () => {
    const w = wake
    wake = undefined
    w?.()
  }
  return {
    push: (item: A, size: number) => {
      if (done) return
      items.push(item)
      bytes += size
      if (bytes > highWater) pause()
      notify()
    },
    end: () => {
      done = true
      notify()
    },
    iterable: (sizeOf: (a: A) => number): AsyncIterable<A> => ({
      [Symbol.asyncIterator]: () => ({
        next: async (): Promise<IteratorResult<A>> => {
          for (;;) {
            const item = items.shift()
            if (item !== undefined) {
              bytes -= sizeOf(item)
              if (bytes <= highWater / 2) resume()
              return { done: false, value: item }
            }
            if (done) return { done: true, value: undefined }
            await new Promise<void>((resolve) => (wake = resolve))
          }
        }
      })
    })
  }
}

export const rawOf = (ws: WebSocket) => (ws as unknown as { _socket?: Socket })._socket

export const bytesOf = (data: WebSocket.RawData): Buffer => (Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data))

/** Send one binary message; resolves once the socket's buffer is below the high water mark. */
export const sendPaced = (ws: WebSocket, message: Uint8Array): Promise<void> =>
  new Promise((resolve) => {
    if (ws.readyState !== WebSocket.OPEN) return resolve()
    ws.send(message, { binary: true }, () => resolve())
    if (ws.bufferedAmount <= highWater) resolve()
  })

/** A session whose frames travel on `ws` (the caller's end). */
export const sessionOn = (ws: WebSocket): StreamSession.StreamSession => {
  const box = inbox<StreamSession.Frame>(
    () => rawOf(ws)?.pause(),
    () => rawOf(ws)?.resume()
  )
  ws.on("message", (data) => {
    const frame = StreamSession.decode(bytesOf(data))
    if (frame !== undefined) box.push(frame, frame.data.length)
  })
  ws.on("close", () => box.end())
  ws.on("error", () => box.end())
  return {
    send: (frame) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(StreamSession.encode(frame), { binary: true })
    },
    frames: box.iterable((f) => f.data.length),
    close: () => {
      if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.close(1000)
      box.end()
    }
  }
}

/** Serve `session` to the peer on `ws` (the process's end) until either ends. */
export const serveSession = async (ws: WebSocket, session: StreamSession.StreamSession): Promise<void> => {
  ws.on("message", (data) => {
    const frame = StreamSession.decode(bytesOf(data))
    if (frame !== undefined) session.send(frame)
  })
  ws.on("close", () => session.close())
  ws.on("error", () => session.close())
  try {
    for await (const frame of session.frames) await sendPaced(ws, StreamSession.encode(frame))
  } finally {
    session.close()
    if (ws.readyState === WebSocket.OPEN) ws.close(1000)
  }
}

/** The query of `GET /v1/containers/{id}/exec` (a WebSocket): the command's words in order, and the flags. */
export const execQuery = (request: StreamSession.ExecStreamRequest): string => {
  const q = new URLSearchParams()
  for (const word of request.command) q.append("command", word)
  if (request.stdin) q.set("stdin", "true")
  if (request.tty) q.set("tty", "true")
  for (const [k, v] of Object.entries(request.env ?? {})) q.append("env", `${k}=${v}`)
  if (request.workingDir !== undefined) q.set("workingDir", request.workingDir)
  return `?${q.toString()}`
}

/** The exec request of a query (`execQuery`'s inverse). */
export const decodeExecQuery = (q: URLSearchParams): StreamSession.ExecStreamRequest => {
  const env: Record<string, string> = {}
  for (const pair of q.getAll("env")) {
    const eq = pair.indexOf("=")
    if (eq > 0) env[pair.slice(0, eq)] = pair.slice(eq + 1)
  }
  const workingDir = q.get("workingDir")
  return {
    command: q.getAll("command"),
    stdin: q.get("stdin") === "true",
    tty: q.get("tty") === "true",
    ...(Object.keys(env).length > 0 ? { env } : {}),
    ...(workingDir === null ? {} : { workingDir })
  }
}

/** The query of `GET /v1/containers/{id}/attach`. */
export const attachQuery = (request: StreamSession.AttachRequest): string =>
  `?${new URLSearchParams({ ...(request.stdin ? { stdin: "true" } : {}), ...(request.tty ? { tty: "true" } : {}) }).toString()}`

/** The attach request of a query. */
export const decodeAttachQuery = (q: URLSearchParams): StreamSession.AttachRequest => ({ stdin: q.get("stdin") === "true", tty: q.get("tty") === "true" })

/** The subprotocol of the kbox socket's streams (its frames are channel.k8s.io's). */
export const protocol = "v5.channel.k8s.io"
