/**
 * The streaming hops between the API server and a node: a `StreamSession` (exec, attach) or a
 * forwarded port's `ByteConnection` carried on a WebSocket, and a pod's TCP port as a
 * `ByteConnection` (what a node dials for `kubectl port-forward`).
 *
 *   session on a socket   one binary message per frame (kbox-client's KboxStreams), as the API's own
 *   connection on a socket one binary message per chunk of bytes; an empty message is the end of
 *                          the sender's stream (TCP half-close); closing the socket tears it down
 */
import { ApiError, type Http, type NodeAccess, Status, type StreamSession } from "@koder/fleet-core"
import { Effect } from "effect"
import { connect, type Socket } from "node:net"
import WebSocket from "ws"
import { KboxStreams } from "@koder/fleet-kbox-client"

const { inbox, rawOf, bytesOf, sendPaced } = KboxStreams

/** A session whose frames travel on `ws` (the caller's end). */
export const sessionOn: (ws: WebSocket) => StreamSession.StreamSession = KboxStreams.sessionOn

/** Serve a session to the peer on `ws` (the process's end) until either ends. */
export const serveSession: (ws: WebSocket, session: StreamSession.StreamSession) => Promise<void> = KboxStreams.serveSession

/** A connection whose bytes travel on `ws`. */
export const connectionOn = (ws: WebSocket): Http.ByteConnection => {
  const box = inbox<Uint8Array>(
    () => rawOf(ws)?.pause(),
    () => rawOf(ws)?.resume()
  )
  ws.on("message", (data) => {
    const bytes = bytesOf(data)
    if (bytes.length === 0) box.end()
    else box.push(bytes, bytes.length)
  })
  ws.on("close", () => box.end())
  ws.on("error", () => box.end())
  return {
    write: (bytes) => (bytes.length === 0 ? Promise.resolve() : sendPaced(ws, bytes)),
    data: box.iterable((b) => b.length),
    end: () => {
      if (ws.readyState === WebSocket.OPEN) ws.send(new Uint8Array(0), { binary: true })
    },
    close: () => {
      if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.close(1000)
      box.end()
    }
  }
}

/** Serve `conn` to the peer on `ws` until both directions end or either side closes. */
export const serveConnection = async (ws: WebSocket, conn: Http.ByteConnection): Promise<void> => {
  ws.on("message", (data) => {
    const bytes = bytesOf(data)
    if (bytes.length === 0) conn.end()
    else void conn.write(bytes)
  })
  ws.on("close", () => conn.close())
  ws.on("error", () => conn.close())
  try {
    for await (const bytes of conn.data) await sendPaced(ws, bytes)
    if (ws.readyState === WebSocket.OPEN) ws.send(new Uint8Array(0), { binary: true })
  } catch {
    conn.close()
  }
}

/** A TCP socket as a ByteConnection. */
export const tcp = (socket: Socket): Http.ByteConnection => {
  const box = inbox<Uint8Array>(
    () => socket.pause(),
    () => socket.resume()
  )
  socket.on("data", (b: Buffer) => box.push(b, b.length))
  socket.on("end", () => box.end())
  socket.on("close", () => box.end())
  socket.on("error", () => box.end())
  return {
    write: (bytes) =>
      new Promise((resolve) => {
        if (socket.destroyed || !socket.writable) return resolve()
        if (socket.write(bytes)) resolve()
        else socket.once("drain", resolve).once("close", resolve)
      }),
    data: box.iterable((b) => b.length),
    end: () => {
      if (!socket.destroyed) socket.end()
    },
    close: () => {
      socket.destroy()
      box.end()
    }
  }
}

/** Dial a pod's port from this host (`NodeAccess.Dial`): 503 naming the address when it cannot connect. */
export const dial: NodeAccess.Dial = (host, port) =>
  Effect.async<Http.ByteConnection, ApiError.ApiError>((resume) => {
    const socket = connect({ host, port })
    socket.setNoDelay(true)
    const timer = setTimeout(() => socket.destroy(new Error("timed out after 10 s")), 10_000)
    socket.once("connect", () => {
      clearTimeout(timer)
      resume(Effect.succeed(tcp(socket)))
    })
    socket.once("error", (e) => {
      clearTimeout(timer)
      resume(Effect.fail(ApiError.of(Status.serviceUnavailable(`cannot connect to ${host}:${port}: ${e.message}`))))
    })
    return Effect.sync(() => socket.destroy())
  })

/**
 * Open a WebSocket client (to an agent's endpoint); a refused upgrade's Status body becomes the
 * ApiError, anything else `unreachable(why)`.
 */
export const open = (url: string, protocol: string, options: WebSocket.ClientOptions, unreachable: (why: string) => ApiError.ApiError): Effect.Effect<WebSocket, ApiError.ApiError> =>
  Effect.async<WebSocket, ApiError.ApiError>((resume) => {
    const ws = new WebSocket(url, [protocol], { ...options, perMessageDeflate: false, handshakeTimeout: 10_000 })
    let settled = false
    const settle = (e: Effect.Effect<WebSocket, ApiError.ApiError>) => {
      if (settled) return
      settled = true
      resume(e)
    }
    ws.once("open", () => settle(Effect.succeed(ws)))
    ws.once("unexpected-response", (_req, res) => {
      let text = ""
      res.on("data", (c: Buffer) => (text += c.toString()))
      res.on("end", () => {
        try {
          const status = JSON.parse(text) as Status.Status
          if (status.kind === "Status") return settle(Effect.fail(ApiError.of(status)))
        } catch {
          // not a Status
        }
        settle(Effect.fail(unreachable(`the agent answered ${res.statusCode ?? 0}`)))
      })
      res.on("error", () => settle(Effect.fail(unreachable(`the agent answered ${res.statusCode ?? 0}`))))
    })
    ws.once("error", (e) => settle(Effect.fail(unreachable(e.message))))
    return Effect.sync(() => ws.terminate())
  })
