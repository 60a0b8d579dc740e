/**
 * The WebSocket side of the API's streaming subresources (exec, attach, port-forward): answering
 * an upgrade request with the handshake (the `ws` package) or with an HTTP error, and the
 * upgraded socket as core's `MessageSocket`.
 *
 * kubectl's port-forward asks for the subprotocol `SPDY/3.1+portforward.k8s.io`, whose `/` is
 * not a token character (RFC 6455 wants tokens) and which `ws` therefore refuses. The handshake
 * is done under a token alias and the response header carries the name the client asked for,
 * as Go's servers, which do not check, answer it.
 */
import type { Http } from "@koder/fleet-core"
import { STATUS_CODES, type IncomingMessage } from "node:http"
import type { Duplex } from "node:stream"
import { WebSocketServer, type WebSocket } from "ws"

const token = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
const alias = "x-fleet-subprotocol"

// Past this many unread bytes from the client, its socket is paused until the reader catches up.
const inboundHighWater = 1 << 20

/** One handshake helper per server: `ws` in no-server mode, with the subprotocol aliasing. */
export interface Upgrader {
  /** Complete the handshake with `protocol`; resolves with the open socket. */
  readonly accept: (req: IncomingMessage, socket: Duplex, head: Buffer, protocol: string) => Promise<WebSocket>
}

/** A new Upgrader. */
export const make = (): Upgrader => {
  const chosen = new WeakMap<IncomingMessage, string>()
  const wss = new WebSocketServer({
    noServer: true,
    // The server copes with the largest frame a client may send (stdin chunks, tunnelled SPDY frames).
    maxPayload: 16 * 1024 * 1024,
    perMessageDeflate: false,
    handleProtocols: (_offered, req) => {
      const p = chosen.get(req)
      return p === undefined ? false : token.test(p) ? p : alias
    }
  })
  wss.on("headers", (headers, req) => {
    const p = chosen.get(req)
    if (p === undefined || token.test(p)) return
    const i = headers.findIndex((h) => h.toLowerCase().startsWith("sec-websocket-protocol:"))
    if (i >= 0) headers[i] = `Sec-WebSocket-Protocol: ${p}`
  })
  return {
    accept: (req, socket, head, protocol) =>
      new Promise((resolve) => {
        chosen.set(req, protocol)
        if (!token.test(protocol)) req.headers["sec-websocket-protocol"] = alias
        wss.handleUpgrade(req, socket, head, (ws) => resolve(ws))
      })
  }
}

/** Answer an upgrade request with an HTTP response instead (an error Status), then close. */
export const refuse = (socket: Duplex, status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void => {
  if (socket.destroyed) return
  const text = typeof body === "string" ? body : JSON.stringify(body)
  const lines = [`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}`, "Content-Type: application/json", `Content-Length: ${Buffer.byteLength(text)}`, "Connection: close"]
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() !== "content-type") lines.push(`${k}: ${v}`)
  socket.end(`${lines.join("\r\n")}\r\n\r\n${text}`)
}

/** An open WebSocket as core's MessageSocket. */
export const messageSocket = (ws: WebSocket): Http.MessageSocket => {
  const queue: Array<Uint8Array> = []
  let queued = 0
  let ended = false
  let wake: (() => void) | undefined
  const notify = () => {
    const w = wake
    wake = undefined
    w?.()
  }
  const raw = (ws as unknown as { _socket?: Duplex })._socket
  ws.on("message", (data: Buffer | ArrayBuffer | Array<Buffer>) => {
    const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data)
    queue.push(bytes)
    queued += bytes.length
    if (queued > inboundHighWater) raw?.pause()
    notify()
  })
  ws.on("close", () => {
    ended = true
    notify()
  })
  ws.on("error", () => {
    ended = true
    notify()
  })
  let closing = false
  return {
    send: (message) =>
      new Promise<void>((resolve) => {
        if (ws.readyState !== ws.OPEN) return resolve()
        ws.send(message, { binary: true }, () => resolve())
      }),
    buffered: () => ws.bufferedAmount,
    messages: {
      [Symbol.asyncIterator]: () => ({
        next: async (): Promise<IteratorResult<Uint8Array>> => {
          for (;;) {
            const m = queue.shift()
            if (m !== undefined) {
              queued -= m.length
              if (queued <= inboundHighWater / 2) raw?.resume()
              return { done: false, value: m }
            }
            if (ended) return { done: true, value: undefined }
            await new Promise<void>((resolve) => (wake = resolve))
          }
        }
      })
    },
    close: (code = 1000, reason = "") => {
      if (closing) return
      closing = true
      if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) {
        ws.close(code, reason)
        // A client that never answers the close handshake is cut off.
        setTimeout(() => ws.terminate(), 5000).unref()
      }
    }
  }
}
