/**
 * The cluster DNS server (DESIGN §8): UDP and TCP on one port (5353 by default), answering
 * cluster names from core's `DnsRecords` over a live `ServiceCatalog`, and forwarding every other
 * name to an upstream resolver when one is configured (REFUSED otherwise: this server does not
 * recurse). The wire format is `dns-packet`'s; nothing here parses DNS by hand.
 *
 *   datagram / TCP frame ─▶ decode ─▶ DnsRecords.resolve ─▶ Found / NxDomain ─▶ encode (UDP: fit or TC)
 *                                                       └▶ NotOurs ─▶ upstream (same transport) or REFUSED
 *
 * Over UDP an answer larger than the client's limit (512 bytes, or its EDNS payload size) is
 * cut to the records that fit and flagged truncated, so resolvers retry over TCP, where the whole
 * answer goes. An upstream that does not answer in time gives SERVFAIL.
 */
import { DnsRecords } from "@koder/fleet-core"
import * as dnsPacket from "dns-packet"
import { createSocket, type Socket as UdpSocket } from "node:dgram"
import { connect, createServer, isIP, type Server as TcpServer, type Socket } from "node:net"
import { Effect, type Scope } from "effect"

/** An address a DNS server listens on or forwards to. */
export interface Address {
  readonly host: string
  readonly port: number
}

/** How the server answers. */
export interface Options {
  readonly listen: Address
  readonly view: DnsRecords.View
  /** The cluster domain (default `cluster.local`). */
  readonly domain?: string
  /** Where names outside the cluster go (none: REFUSED). */
  readonly upstream?: Address
  /** How long an upstream has to answer (default 2 s). */
  readonly upstreamTimeoutMs?: number
}

/** A running server. */
export interface DnsServer {
  /** The bound address (the port chosen when 0 was asked). */
  readonly address: Address
  readonly close: () => Promise<void>
}

const rcodes = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 } as const

/** The UDP answer size a query allows: 512 bytes, or its EDNS payload size (at most 4096). */
const udpLimit = (query: dnsPacket.DecodedPacket): number => {
  const opt = (query.additionals ?? []).find((a): a is dnsPacket.OptAnswer => a.type === "OPT")
  return opt === undefined ? 512 : Math.min(4096, Math.max(512, opt.udpPayloadSize))
}

const toWire = (r: DnsRecords.ResourceRecord): dnsPacket.Answer => {
  switch (r.type) {
    case "A":
    case "AAAA":
    case "CNAME":
      return { type: r.type, name: r.name, ttl: r.ttl, class: "IN", data: r.data }
    case "SRV":
      return { type: "SRV", name: r.name, ttl: r.ttl, class: "IN", data: { ...r.data } }
    case "SOA":
      return { type: "SOA", name: r.name, ttl: r.ttl, class: "IN", data: { ...r.data } }
  }
}

/**
 * The response to one query (pure given the view): `undefined` when the name is not the
 * cluster's and should be forwarded.
 */
export const answer = (query: dnsPacket.DecodedPacket, view: DnsRecords.View, options: { readonly domain?: string; readonly recursion: boolean }): dnsPacket.Packet | undefined => {
  const rd = query.flag_rd ? dnsPacket.RECURSION_DESIRED : 0
  const ra = options.recursion ? dnsPacket.RECURSION_AVAILABLE : 0
  const edns = (query.additionals ?? []).some((a) => a.type === "OPT")
  const opt: Array<dnsPacket.Answer> = edns ? [{ type: "OPT", name: ".", udpPayloadSize: 1232, extendedRcode: 0, ednsVersion: 0, flags: 0, flag_do: false, options: [] }] : []
  const reply = (rcode: number, extra: Partial<dnsPacket.Packet> = {}, aa = false): dnsPacket.Packet => ({
    type: "response",
    id: query.id ?? 0,
    flags: (aa ? dnsPacket.AUTHORITATIVE_ANSWER : 0) | rd | ra | rcode,
    questions: query.questions ?? [],
    ...extra,
    additionals: [...(extra.additionals ?? []), ...opt]
  })
  const opcode = (query as unknown as { readonly opcode?: string }).opcode
  if (opcode !== undefined && opcode !== "QUERY") return reply(rcodes.NOTIMP)
  const questions = query.questions ?? []
  if (questions.length !== 1) return reply(rcodes.FORMERR)
  const q = questions[0]!
  const result = DnsRecords.resolve(q.name, q.type, view, options.domain === undefined ? {} : { domain: options.domain })
  switch (result._tag) {
    case "Found":
      return reply(rcodes.NOERROR, { answers: result.answers.map(toWire), additionals: result.additionals.map(toWire), authorities: result.authorities.map(toWire) }, true)
    case "NxDomain":
      return reply(rcodes.NXDOMAIN, { authorities: result.authorities.map(toWire) }, true)
    case "NotOurs":
      return options.recursion ? undefined : reply(rcodes.REFUSED)
  }
}

/**
 * Encode for UDP within `limit` bytes: additionals (but EDNS's OPT) dropped first, then
 * answers from the end, with the TC flag set once anything was left out.
 */
export const fitUdp = (packet: dnsPacket.Packet, limit: number): Buffer => {
  const full = dnsPacket.encode(packet)
  if (full.length <= limit) return full
  const opt = (packet.additionals ?? []).filter((a) => a.type === "OPT")
  const answers = [...(packet.answers ?? [])]
  const cut = (n: number): dnsPacket.Packet => ({
    ...packet,
    flags: (packet.flags ?? 0) | dnsPacket.TRUNCATED_RESPONSE,
    answers: answers.slice(0, n),
    authorities: [],
    additionals: opt
  })
  let n = answers.length
  while (n > 0 && dnsPacket.encodingLength(cut(n)) > limit) n--
  return dnsPacket.encode(cut(n))
}

const servfail = (query: Buffer): Buffer | undefined => {
  try {
    const q = dnsPacket.decode(query)
    return dnsPacket.encode({
      type: "response",
      id: q.id ?? 0,
      flags: (q.flag_rd ? dnsPacket.RECURSION_DESIRED : 0) | dnsPacket.RECURSION_AVAILABLE | rcodes.SERVFAIL,
      questions: q.questions ?? []
    })
  } catch {
    return undefined
  }
}

/** Send `query` to `upstream` over UDP; its answer, or undefined on timeout or error. */
const forwardUdp = (upstream: Address, query: Buffer, timeoutMs: number): Promise<Buffer | undefined> =>
  new Promise((resolve) => {
    const socket = createSocket(isIP(upstream.host) === 6 ? "udp6" : "udp4")
    const done = (b: Buffer | undefined) => {
      clearTimeout(timer)
      socket.close()
      resolve(b)
    }
    const timer = setTimeout(() => done(undefined), timeoutMs)
    socket.on("error", () => done(undefined))
    socket.on("message", (msg) => {
      if (msg.length >= 2 && msg.readUInt16BE(0) === query.readUInt16BE(0)) done(msg)
    })
    socket.send(query, upstream.port, upstream.host)
  })

/** Send `query` to `upstream` over TCP (length-prefixed); its answer, or undefined. */
const forwardTcp = (upstream: Address, query: Buffer, timeoutMs: number): Promise<Buffer | undefined> =>
  new Promise((resolve) => {
    const socket = connect({ host: upstream.host, port: upstream.port })
    let buffered = Buffer.alloc(0)
    let settled = false
    const done = (b: Buffer | undefined) => {
      if (settled) return
      settled = true
      socket.destroy()
      resolve(b)
    }
    socket.setTimeout(timeoutMs, () => done(undefined))
    socket.on("error", () => done(undefined))
    socket.on("close", () => done(undefined))
    socket.on("connect", () => {
      const len = Buffer.alloc(2)
      len.writeUInt16BE(query.length)
      socket.write(Buffer.concat([len, query]))
    })
    socket.on("data", (chunk) => {
      buffered = Buffer.concat([buffered, chunk])
      if (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) done(buffered.subarray(2, 2 + buffered.readUInt16BE(0)))
    })
  })

const listenUdp = (host: string, port: number): Promise<UdpSocket> =>
  new Promise((resolve, reject) => {
    const socket = createSocket({ type: isIP(host) === 6 ? "udp6" : "udp4" })
    socket.once("error", reject)
    socket.bind(port, host, () => {
      socket.off("error", reject)
      resolve(socket)
    })
  })

const listenTcp = (server: TcpServer, host: string, port: number): Promise<void> =>
  new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(port, host, () => {
      server.off("error", reject)
      resolve()
    })
  })

/** Start a server; rejects when the address cannot be bound (UDP and TCP both). */
export const start = async (options: Options): Promise<DnsServer> => {
  const timeoutMs = options.upstreamTimeoutMs ?? 2000
  const recursion = options.upstream !== undefined
  const answerOptions = { recursion, ...(options.domain === undefined ? {} : { domain: options.domain }) }

  /** The bytes to send back for one query message, or undefined to drop it. */
  const handle = async (message: Buffer, transport: "udp" | "tcp"): Promise<Buffer | undefined> => {
    let query: dnsPacket.DecodedPacket
    try {
      query = dnsPacket.decode(message)
    } catch {
      return undefined
    }
    if (query.type !== "query") return undefined
    const response = answer(query, options.view, answerOptions)
    if (response !== undefined) return transport === "udp" ? fitUdp(response, udpLimit(query)) : dnsPacket.encode(response)
    const upstream = options.upstream!
    const forwarded = await (transport === "udp" ? forwardUdp(upstream, message, timeoutMs) : forwardTcp(upstream, message, timeoutMs))
    return forwarded ?? servfail(message)
  }

  const connections = new Set<Socket>()
  const tcp = createServer({ allowHalfOpen: false }, (socket: Socket) => {
    connections.add(socket)
    socket.on("close", () => connections.delete(socket))
    let buffered = Buffer.alloc(0)
    socket.setTimeout(10_000, () => socket.destroy())
    socket.on("error", () => socket.destroy())
    socket.on("data", (chunk) => {
      buffered = Buffer.concat([buffered, chunk])
      while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        const length = buffered.readUInt16BE(0)
        const message = buffered.subarray(2, 2 + length)
        buffered = buffered.subarray(2 + length)
        void handle(Buffer.from(message), "tcp").then((out) => {
          if (out === undefined || socket.destroyed) return
          const len = Buffer.alloc(2)
          len.writeUInt16BE(out.length)
          socket.write(Buffer.concat([len, out]))
        })
      }
    })
  })

  // UDP first (port 0 picks one), then TCP on the same port; a port free for UDP but taken for
  // TCP is given up and another picked, a few times.
  let udp: UdpSocket | undefined
  for (let attempt = 0; ; attempt++) {
    udp = await listenUdp(options.listen.host, options.listen.port)
    const port = udp.address().port
    try {
      await listenTcp(tcp, options.listen.host, port)
      break
    } catch (e) {
      udp.close()
      if (options.listen.port !== 0 || attempt >= 5) throw e
    }
  }
  const socket = udp
  socket.on("message", (message, peer) => {
    void handle(message, "udp").then((out) => {
      if (out !== undefined) socket.send(out, peer.port, peer.address)
    })
  })
  return {
    address: { host: options.listen.host, port: socket.address().port },
    close: async () => {
      await new Promise<void>((resolve) => socket.close(() => resolve()))
      const closed = new Promise<void>((resolve) => tcp.close(() => resolve()))
      for (const c of connections) c.destroy()
      await closed
    }
  }
}

/** The server as a scoped resource. */
export const make = (options: Options): Effect.Effect<DnsServer, Error, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({ try: () => start(options), catch: (e) => (e instanceof Error ? e : new Error(String(e))) }),
    (s) => Effect.promise(() => s.close())
  )
