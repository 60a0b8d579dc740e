/**
 * The SPDY/3.1 port-forward session (net/SpdyTunnel): frames and header blocks encode and parse
 * back, frames split across WebSocket messages are reassembled, the dictionary is SPDY/3's, and a
 * whole session run against a client written here from the spec (SYN_STREAM pairs, DATA, FIN,
 * PING) forwards bytes to a real TCP server and reports a dial failure on the error stream.
 */
import { createServer, type AddressInfo } from "node:net"
import { constants, createDeflate, createInflate } from "node:zlib"
import type { Http } from "@koder/fleet-core"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { dictionary } from "../../src/net/SpdyDictionary.js"
import * as SpdyTunnel from "../../src/net/SpdyTunnel.js"
import * as StreamSockets from "../../src/net/StreamSockets.js"

const zlibThrough = (z: ReturnType<typeof createDeflate> | ReturnType<typeof createInflate>, input: Buffer): Promise<Buffer> =>
  new Promise((resolve) => {
    const chunks: Array<Buffer> = []
    const on = (c: Buffer) => chunks.push(c)
    z.on("data", on)
    z.write(input)
    z.flush(constants.Z_SYNC_FLUSH, () => {
      z.off("data", on)
      resolve(Buffer.concat(chunks))
    })
  })

describe("SPDY framing", () => {
  it("has SPDY/3's 1,423-byte dictionary, starting with the length of 'options'", () => {
    expect(dictionary.length).toBe(1423)
    expect(dictionary.subarray(0, 11).toString("latin1")).toBe("\x00\x00\x00\x07options")
    expect(dictionary.subarray(-6).toString("latin1")).toBe("enq=0.")
  })
  it("round-trips header blocks", () => {
    const headers = { streamtype: "data", port: "8080", requestid: "0" }
    expect(SpdyTunnel.parseHeaderBlock(SpdyTunnel.headerBlock(headers))).toEqual(headers)
    expect(SpdyTunnel.parseHeaderBlock(SpdyTunnel.headerBlock({}))).toEqual({})
  })
  it("reassembles frames split anywhere across messages", () => {
    const wire = Buffer.concat([SpdyTunnel.dataFrame(1, Buffer.from("abc"), true), SpdyTunnel.controlFrame(6, 0, Buffer.from([0, 0, 0, 1]))])
    for (let cut = 0; cut <= wire.length; cut++) {
      const a = SpdyTunnel.takeFrames(wire.subarray(0, cut))
      const b = SpdyTunnel.takeFrames(Buffer.concat([a.rest, wire.subarray(cut)]))
      const frames = [...a.frames, ...b.frames]
      expect(frames).toHaveLength(2)
      expect(frames[0]).toMatchObject({ control: false, stream: 1, flags: 1 })
      expect(frames[1]).toMatchObject({ control: true, type: 6 })
      expect(b.rest.length).toBe(0)
    }
  })
})

/** A socket pair: what the test writes arrives as the tunnel's messages, and the reverse. */
const pair = () => {
  const toTunnel: Array<Uint8Array> = []
  let wakeTunnel: (() => void) | undefined
  let closed = false
  const fromTunnel: Array<Buffer> = []
  let wakeTest: (() => void) | undefined
  const socket: Http.MessageSocket = {
    send: async (m) => {
      fromTunnel.push(Buffer.from(m))
      wakeTest?.()
    },
    buffered: () => 0,
    messages: {
      async *[Symbol.asyncIterator]() {
        for (;;) {
          const m = toTunnel.shift()
          if (m !== undefined) yield m
          else if (closed) return
          else await new Promise<void>((r) => (wakeTunnel = r))
        }
      }
    },
    close: () => {
      closed = true
      wakeTunnel?.()
    }
  }
  let buffered = Buffer.alloc(0)
  const nextFrame = async () => {
    for (;;) {
      const { frames, rest } = SpdyTunnel.takeFrames(buffered)
      if (frames.length > 0) {
        const whole = frames[0]!
        // Put back all but the first frame.
        const used = whole.control ? 8 + whole.body.length : 8 + whole.data.length
        buffered = buffered.subarray(used)
        void rest
        return whole
      }
      const m = fromTunnel.shift()
      if (m !== undefined) buffered = Buffer.concat([buffered, m])
      else await new Promise<void>((r) => (wakeTest = r))
    }
  }
  return {
    socket,
    write: (b: Buffer) => {
      toTunnel.push(b)
      wakeTunnel?.()
    },
    nextFrame,
    end: () => socket.close()
  }
}

describe("a port-forward session", () => {
  it("forwards a stream's bytes to the port, answers PING, and reports a dial failure on the error stream", async () => {
    const server = createServer((s) => s.on("data", (d: Buffer) => s.end(`echo:${d.toString()}`)))
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    const port = (server.address() as AddressInfo).port
    const p = pair()
    const open = (n: number) => (n === port ? Effect.runPromise(StreamSockets.dial("127.0.0.1", n)) : Promise.reject(new Error(`nothing listens on ${n}`)))
    const done = SpdyTunnel.tunnel(p.socket, open)
    const deflate = createDeflate({ dictionary })
    const inflate = createInflate({ dictionary })
    const syn = async (id: number, headers: Record<string, string>) => {
      const block = await zlibThrough(deflate, SpdyTunnel.headerBlock(headers))
      const head = Buffer.alloc(10)
      head.writeUInt32BE(id, 0)
      p.write(SpdyTunnel.controlFrame(1, 0, Buffer.concat([head, block])))
    }
    await syn(1, { streamtype: "error", port: String(port), requestid: "0" })
    await syn(3, { streamtype: "data", port: String(port), requestid: "0" })
    p.write(SpdyTunnel.dataFrame(3, Buffer.from("hi")))
    p.write(SpdyTunnel.controlFrame(6, 0, Buffer.from([0, 0, 0, 1])))
    const seen: Array<string> = []
    let data = ""
    while (!seen.includes("fin:3") || !seen.includes("fin:1") || !seen.includes("ping")) {
      const f = await p.nextFrame()
      if (f.control && f.type === 2) {
        await zlibThrough(inflate, f.body.subarray(4))
        seen.push(`reply:${f.body.readUInt32BE(0)}`)
      } else if (f.control && f.type === 6) seen.push("ping")
      else if (!f.control) {
        if (f.stream === 3) data += f.data.toString()
        if ((f.flags & 1) !== 0) seen.push(`fin:${f.stream}`)
      }
    }
    expect(seen).toEqual(expect.arrayContaining(["reply:1", "reply:3"]))
    expect(data).toBe("echo:hi")

    await syn(5, { streamtype: "error", port: "1", requestid: "1" })
    await syn(7, { streamtype: "data", port: "1", requestid: "1" })
    let error = ""
    for (;;) {
      const f = await p.nextFrame()
      if (f.control && f.type === 2) await zlibThrough(inflate, f.body.subarray(4))
      if (!f.control && f.stream === 5) {
        error += f.data.toString()
        if ((f.flags & 1) !== 0) break
      }
    }
    expect(error).toMatch(/nothing listens on 1/)
    p.end()
    expect(await done).toEqual({ ports: [port, 1], connections: 1 })
    server.close()
  }, 20_000)
})
