/**
 * kubectl's port-forward: a SPDY/3.1 session (the server's half) carried in binary WebSocket
 * messages (`SPDY/3.1+portforward.k8s.io`, client-go's tunnelling dialer since 1.30). core's
 * PodStreams passes it the upgraded socket and a way to open a pod's port.
 *
 * Only what port-forward uses of SPDY is spoken, as kubelet's server does: the client opens two
 * streams per connection, headers `streamtype: error|data`, `port`, `requestid`; each is answered
 * with SYN_REPLY; the data stream carries the connection's bytes both ways (FIN: that side is
 * done); the error stream carries a failure's message and is finished when the connection is.
 * PINGs are echoed; SETTINGS and WINDOW_UPDATE are read and ignored (client-go's spdystream does
 * no flow control either). Header blocks are zlib with the SPDY/3 dictionary, one stream per
 * direction for the whole session. No library speaks SPDY outside HTTP (spdy-transport requires
 * `:method`/`:path` on every stream), hence this module.
 */
import type { Http, PodStreams } from "@koder/fleet-core"
import { constants, createDeflate, createInflate, type Deflate, type Inflate } from "node:zlib"
import { dictionary } from "./SpdyDictionary.js"

const version = 3
const Type = { synStream: 1, synReply: 2, rstStream: 3, settings: 4, ping: 6, goAway: 7, headers: 8, windowUpdate: 9 } as const
const finFlag = 0x01

/** Run one zlib flush of `input` through a persistent (de)compression stream. */
const through = (z: Inflate | Deflate, input: Uint8Array): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    const onData = (c: Buffer) => chunks.push(c)
    const onError = (e: Error) => {
      z.off("data", onData)
      reject(e)
    }
    z.on("data", onData)
    z.once("error", onError)
    z.write(input)
    z.flush(constants.Z_SYNC_FLUSH, () => {
      z.off("data", onData)
      z.off("error", onError)
      resolve(Buffer.concat(chunks))
    })
  })

/** A decompressed header block as lower-case name → value (pure). */
export const parseHeaderBlock = (block: Buffer): Record<string, string> => {
  const out: Record<string, string> = {}
  if (block.length < 4) return out
  const count = block.readUInt32BE(0)
  let at = 4
  for (let i = 0; i < count && at + 4 <= block.length; i++) {
    const n = block.readUInt32BE(at)
    const name = block.subarray(at + 4, at + 4 + n).toString("latin1").toLowerCase()
    at += 4 + n
    if (at + 4 > block.length) break
    const v = block.readUInt32BE(at)
    out[name] = block.subarray(at + 4, at + 4 + v).toString("latin1")
    at += 4 + v
  }
  return out
}

/** A header block before compression (pure). */
export const headerBlock = (headers: Readonly<Record<string, string>>): Buffer => {
  const entries = Object.entries(headers)
  const parts: Array<Buffer> = [Buffer.alloc(4)]
  parts[0]!.writeUInt32BE(entries.length)
  for (const [k, v] of entries) {
    for (const s of [k.toLowerCase(), v]) {
      const b = Buffer.from(s, "latin1")
      const len = Buffer.alloc(4)
      len.writeUInt32BE(b.length)
      parts.push(len, b)
    }
  }
  return Buffer.concat(parts)
}

/** A control frame (pure). */
export const controlFrame = (type: number, flags: number, body: Uint8Array): Buffer => {
  const head = Buffer.alloc(8)
  head.writeUInt16BE(0x8000 | version, 0)
  head.writeUInt16BE(type, 2)
  head.writeUInt32BE(((flags & 0xff) << 24) | body.length, 4)
  return Buffer.concat([head, body])
}

/** A data frame (pure). */
export const dataFrame = (stream: number, data: Uint8Array, fin = false): Buffer => {
  const head = Buffer.alloc(8)
  head.writeUInt32BE(stream & 0x7fffffff, 0)
  head.writeUInt32BE(((fin ? finFlag : 0) << 24) | data.length, 4)
  return Buffer.concat([head, data])
}

const u32 = (n: number): Buffer => {
  const b = Buffer.alloc(4)
  b.writeUInt32BE(n >>> 0)
  return b
}

/** One parsed frame (pure reader over an accumulating buffer). */
type Frame =
  | { readonly control: true; readonly type: number; readonly flags: number; readonly body: Buffer }
  | { readonly control: false; readonly stream: number; readonly flags: number; readonly data: Buffer }

/** The whole frames at the head of `buffer`, and what is left (pure). */
export const takeFrames = (buffer: Buffer): { readonly frames: ReadonlyArray<Frame>; readonly rest: Buffer } => {
  const frames: Array<Frame> = []
  let at = 0
  while (buffer.length - at >= 8) {
    const first = buffer.readUInt32BE(at)
    const word = buffer.readUInt32BE(at + 4)
    const length = word & 0xffffff
    if (buffer.length - at - 8 < length) break
    const body = buffer.subarray(at + 8, at + 8 + length)
    const flags = word >>> 24
    frames.push((first & 0x80000000) !== 0 ? { control: true, type: first & 0xffff, flags, body } : { control: false, stream: first & 0x7fffffff, flags, data: body })
    at += 8 + length
  }
  return { frames, rest: buffer.subarray(at) }
}

interface Pair {
  data?: number
  error?: number
  port?: number
  conn?: Http.ByteConnection
  /** Frames that arrived on the data stream before the pod's port answered. */
  early: Array<{ readonly data: Buffer; readonly fin: boolean }>
  opened: boolean
}

/** The Tunnel core's PodStreams runs for `SPDY/3.1+portforward.k8s.io`. */
export const tunnel: PodStreams.Tunnel = async (socket, open) => {
  const inflate = createInflate({ dictionary })
  const deflate = createDeflate({ dictionary })
  const pairs = new Map<string, Pair>()
  const byStream = new Map<number, { readonly pair: Pair; readonly kind: "data" | "error" }>()
  const ports: Array<number> = []
  let connections = 0
  let writes = Promise.resolve()
  const send = (frame: Buffer) => {
    writes = writes.then(() => socket.send(frame))
    return writes
  }
  // Header compression is one zlib stream: SYN_REPLYs are compressed in the order they are sent.
  let compressing = Promise.resolve()
  const reply = (stream: number) => {
    compressing = compressing.then(async () => {
      const block = await through(deflate, headerBlock({}))
      await send(controlFrame(Type.synReply, 0, Buffer.concat([u32(stream), block])))
    })
    return compressing
  }
  const finish = (pair: Pair) => {
    if (pair.error !== undefined) void send(dataFrame(pair.error, new Uint8Array(0), true))
  }
  const fail = (pair: Pair, message: string) => {
    if (pair.error !== undefined) void send(dataFrame(pair.error, Buffer.from(message), true))
    if (pair.data !== undefined) void send(dataFrame(pair.data, new Uint8Array(0), true))
  }
  const start = (pair: Pair) => {
    if (pair.opened || pair.data === undefined || pair.error === undefined || pair.port === undefined) return
    pair.opened = true
    const dataStream = pair.data
    const port = pair.port
    ports.push(port)
    void open(port).then(
      async (conn) => {
        connections++
        pair.conn = conn
        for (const f of pair.early.splice(0)) {
          if (f.data.length > 0) await conn.write(f.data)
          if (f.fin) conn.end()
        }
        try {
          for await (const bytes of conn.data) await send(dataFrame(dataStream, bytes))
        } finally {
          await send(dataFrame(dataStream, new Uint8Array(0), true))
          finish(pair)
        }
      },
      (e: unknown) => fail(pair, e instanceof Error ? e.message : String(e))
    )
  }
  const onSynStream = async (body: Buffer) => {
    const stream = body.readUInt32BE(0) & 0x7fffffff
    const headers = parseHeaderBlock(await through(inflate, body.subarray(10)))
    await reply(stream)
    const id = headers["requestid"] ?? String(stream)
    const pair = pairs.get(id) ?? { early: [], opened: false }
    pairs.set(id, pair)
    const kind = headers["streamtype"] === "error" ? "error" : "data"
    if (kind === "error") pair.error = stream
    else pair.data = stream
    const port = Number(headers["port"])
    if (!(Number.isInteger(port) && port > 0 && port < 65536)) return fail(pair, `invalid port ${JSON.stringify(headers["port"] ?? "")}`)
    pair.port = port
    byStream.set(stream, { pair, kind })
    start(pair)
  }
  const onControl = async (type: number, body: Buffer) => {
    switch (type) {
      case Type.synStream:
        return onSynStream(body)
      case Type.ping:
        return void send(controlFrame(Type.ping, 0, body))
      case Type.rstStream: {
        const s = byStream.get(body.readUInt32BE(0) & 0x7fffffff)
        s?.pair.conn?.close()
        return
      }
      case Type.headers:
        // Headers on an open stream carry nothing port-forward uses, but their block is part of
        // the session's compression stream and must be read through it.
        await through(inflate, body.subarray(4))
        return
      case Type.goAway:
        return socket.close(1000)
      default:
        return
    }
  }
  const onData = async (stream: number, flags: number, data: Buffer) => {
    const s = byStream.get(stream)
    if (s === undefined || s.kind === "error") return
    const fin = (flags & finFlag) !== 0
    const conn = s.pair.conn
    if (conn === undefined) return void s.pair.early.push({ data: Buffer.from(data), fin })
    if (data.length > 0) await conn.write(data)
    if (fin) conn.end()
  }
  let pending: Buffer = Buffer.alloc(0)
  try {
    for await (const message of socket.messages) {
      const { frames, rest } = takeFrames(pending.length === 0 ? Buffer.from(message) : Buffer.concat([pending, message]))
      pending = Buffer.from(rest)
      for (const f of frames) {
        if (f.control) await onControl(f.type, f.body)
        else await onData(f.stream, f.flags, f.data)
      }
    }
  } catch {
    // A broken header block or socket ends the session like a closed socket does.
  } finally {
    for (const p of pairs.values()) p.conn?.close()
    inflate.close()
    deflate.close()
    socket.close(1000)
  }
  return { ports, connections }
}
