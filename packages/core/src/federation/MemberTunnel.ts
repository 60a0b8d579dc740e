/**
 * The tunnel a Pull member keeps open to the hub, so the hub can reach the member's API from
 * behind NAT (OCM's cluster-proxy, Karmada's agent proxy). The member dials
 * `…/memberclusters/{name}/tunnel` with its certificate (a WebSocket, subprotocol `Subprotocol`);
 * then the hub sends requests down it and the member answers them from its own API, under the
 * impersonation headers the hub set.
 *
 * Frames are binary WebSocket messages: one byte of type, four of request id (big-endian), then
 * the payload.
 *
 *   Head  (1)  JSON: a request {method, path, headers} (hub → member) or a response
 *              {status, headers} (member → hub)
 *   Data  (2)  body bytes, at most `chunkBytes` per frame, so no message nears the socket's limit
 *   End   (3)  the body is complete
 *
 * Requests are answered concurrently and in any order. The hub bounds what it buffers per
 * response (`maxResponseBytes`) and how long it waits (`timeoutMs`).
 */
import type { MessageSocket } from "../api/Http.js"
import type * as MemberConnections from "./MemberConnections.js"

/** The WebSocket subprotocol of the tunnel. */
export const Subprotocol = "tunnel.federation.fleet.koder.dev"

const Head = 1
const Data = 2
const End = 3

/** The largest body slice one frame carries. */
export const chunkBytes = 1024 * 1024

const frame = (type: number, id: number, payload: Uint8Array): Uint8Array => {
  const out = new Uint8Array(5 + payload.length)
  out[0] = type
  new DataView(out.buffer).setUint32(1, id)
  out.set(payload, 5)
  return out
}

const parse = (message: Uint8Array): { readonly type: number; readonly id: number; readonly payload: Uint8Array } | undefined =>
  message.length < 5 ? undefined : { type: message[0]!, id: new DataView(message.buffer, message.byteOffset, message.byteLength).getUint32(1), payload: message.subarray(5) }

const encoder = new TextEncoder()
const decoder = new TextDecoder()

const sendMessage = async (socket: MessageSocket, id: number, head: unknown, body: Uint8Array | undefined): Promise<void> => {
  await socket.send(frame(Head, id, encoder.encode(JSON.stringify(head))))
  for (let at = 0; body !== undefined && at < body.length; at += chunkBytes) await socket.send(frame(Data, id, body.subarray(at, at + chunkBytes)))
  await socket.send(frame(End, id, new Uint8Array(0)))
}

const concat = (parts: ReadonlyArray<Uint8Array>, size: number): Uint8Array => {
  const out = new Uint8Array(size)
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

/** Hub side: a connection over a member's open tunnel. `closed` resolves when the tunnel ends. */
export const client = (
  socket: MessageSocket,
  options: { readonly timeoutMs?: number; readonly maxResponseBytes?: number } = {}
): { readonly connection: MemberConnections.Connection; readonly closed: Promise<void> } => {
  const timeoutMs = options.timeoutMs ?? 30_000
  const maxBytes = options.maxResponseBytes ?? 64 * 1024 * 1024
  interface Pending {
    head?: { status: number; headers: Record<string, string> }
    readonly parts: Array<Uint8Array>
    size: number
    readonly resolve: (r: MemberConnections.ProxyResponse) => void
    readonly reject: (e: Error) => void
  }
  const pending = new Map<number, Pending>()
  let next = 1
  let open = true
  const fail = (id: number, why: string) => {
    const p = pending.get(id)
    if (p === undefined) return
    pending.delete(id)
    p.reject(new Error(why))
  }
  const closed = (async () => {
    for await (const message of socket.messages) {
      const f = parse(message)
      const p = f === undefined ? undefined : pending.get(f.id)
      if (f === undefined || p === undefined) continue
      if (f.type === Head) {
        try {
          const head = JSON.parse(decoder.decode(f.payload)) as { status?: unknown; headers?: unknown }
          p.head = { status: typeof head.status === "number" ? head.status : 502, headers: (typeof head.headers === "object" && head.headers !== null ? head.headers : {}) as Record<string, string> }
        } catch {
          fail(f.id, "the member sent a malformed response")
        }
      } else if (f.type === Data) {
        p.size += f.payload.length
        if (p.size > maxBytes) fail(f.id, `the member's response is over ${maxBytes} bytes`)
        else p.parts.push(f.payload.slice())
      } else if (f.type === End) {
        pending.delete(f.id)
        if (p.head === undefined) p.reject(new Error("the member sent a body without a response"))
        else p.resolve({ status: p.head.status, headers: p.head.headers, body: concat(p.parts, p.size) })
      }
    }
  })()
    .catch(() => undefined)
    .finally(() => {
      open = false
      for (const id of [...pending.keys()]) fail(id, "the member's tunnel closed")
    })
  const request = (r: MemberConnections.ProxyRequest): Promise<MemberConnections.ProxyResponse> =>
    new Promise((resolve, reject) => {
      if (!open) return reject(new Error("the member's tunnel closed"))
      const id = next
      next = next >= 0xffffffff ? 1 : next + 1
      const timer = setTimeout(() => fail(id, `the member did not answer within ${timeoutMs} ms`), timeoutMs)
      pending.set(id, {
        parts: [],
        size: 0,
        resolve: (v) => (clearTimeout(timer), resolve(v)),
        reject: (e) => (clearTimeout(timer), reject(e))
      })
      sendMessage(socket, id, { method: r.method, path: r.path, headers: r.headers }, r.body).catch((e: unknown) => fail(id, e instanceof Error ? e.message : String(e)))
    })
  return { connection: { mode: "Pull", request }, closed }
}

/**
 * Member side: answer the hub's requests with `handle` until the tunnel closes. A request without
 * impersonation is refused: the tunnel never acts as the member itself.
 */
export const serve = async (socket: MessageSocket, handle: (request: MemberConnections.ProxyRequest) => Promise<MemberConnections.ProxyResponse>): Promise<void> => {
  const open = new Map<number, { head: { method: string; path: string; headers: Record<string, string> }; parts: Array<Uint8Array>; size: number }>()
  const answer = (id: number, r: MemberConnections.ProxyResponse) => sendMessage(socket, id, { status: r.status, headers: r.headers }, r.body).catch(() => undefined)
  const refuse = (id: number, code: number, message: string) =>
    answer(id, { status: code, headers: { "content-type": "application/json" }, body: encoder.encode(JSON.stringify({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, code })) })
  for await (const message of socket.messages) {
    const f = parse(message)
    if (f === undefined) continue
    if (f.type === Head) {
      try {
        const head = JSON.parse(decoder.decode(f.payload)) as { method: string; path: string; headers: Record<string, string> }
        if (typeof head.method !== "string" || typeof head.path !== "string" || !head.path.startsWith("/")) throw new Error("bad head")
        open.set(f.id, { head: { method: head.method, path: head.path, headers: head.headers ?? {} }, parts: [], size: 0 })
      } catch {
        void refuse(f.id, 400, "malformed tunnel request")
      }
    } else if (f.type === Data) {
      const r = open.get(f.id)
      if (r !== undefined) {
        r.parts.push(f.payload.slice())
        r.size += f.payload.length
      }
    } else if (f.type === End) {
      const r = open.get(f.id)
      open.delete(f.id)
      if (r === undefined) continue
      const headers = Object.fromEntries(Object.entries(r.head.headers).map(([k, v]) => [k.toLowerCase(), v]))
      if ((headers["impersonate-user"] ?? "") === "") {
        void refuse(f.id, 403, "the member answers the hub's tunnel only for an impersonated user")
        continue
      }
      const request = { method: r.head.method, path: r.head.path, headers, ...(r.size === 0 ? {} : { body: concat(r.parts, r.size) }) }
      void handle(request).then(
        (response) => answer(f.id, response),
        (e: unknown) => refuse(f.id, 502, `the member could not answer: ${e instanceof Error ? e.message : String(e)}`)
      )
    }
  }
}
