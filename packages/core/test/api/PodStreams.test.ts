/**
 * The streaming pod subresources' pure parts (core/api/PodStreams): which RBAC verb a WebSocket
 * exec, attach or port-forward asks for, the query parsing with the errors a user sees, and the
 * relay between a client's socket and a session (stdin forwarded and ended, the exit Status
 * passed on, a v4 client's close frames dropped, a client that goes away ending the session).
 */
import { describe, expect, it } from "vitest"
import * as ApiError from "../../src/api/ApiError.js"
import * as Authz from "../../src/api/Authz.js"
import type { MessageSocket } from "../../src/api/Http.js"
import * as PodStreams from "../../src/api/PodStreams.js"
import * as Router from "../../src/api/Router.js"
import * as StreamSession from "../../src/runtime/StreamSession.js"

const attributesOf = (method: string, path: string) =>
  Authz.attributes(Router.route(path), {
    method,
    path,
    query: new URLSearchParams(),
    headers: { upgrade: "websocket" },
    body: undefined,
    user: { name: "u", uid: "u", groups: [] },
    client: "c"
  })

describe("authorization of the streams", () => {
  it.each([
    ["GET", "exec", "exec"],
    ["POST", "exec", "exec"],
    ["GET", "attach", "exec"],
    ["POST", "attach", "exec"],
    ["GET", "portforward", "create"],
    ["POST", "portforward", "create"]
  ])("%s pods/%s asks for %s", (method, sub, verb) => {
    expect(attributesOf(method, `/api/v1/namespaces/d/pods/p/${sub}`)).toMatchObject({ verb, resource: "pods", subresource: sub })
  })
})

describe("query parsing", () => {
  it.each([
    ["stdin=true&stdout=true&tty=true&stderr=true", { stdin: true, stdout: true, stderr: false, tty: true }],
    ["stdout=true&stderr=true", { stdin: false, stdout: true, stderr: true, tty: false }],
    ["stdin=1", { stdin: true, stdout: false, stderr: false, tty: false }]
  ])("streams of %s", (query, expected) => {
    expect(PodStreams.parseStreams(new URLSearchParams(query), "PodExecOptions")).toEqual(expected)
  })
  it("refuses a session with no stream, naming the fields", () => {
    const e = PodStreams.parseStreams(new URLSearchParams("tty=true"), "PodExecOptions")
    expect(e).toBeInstanceOf(ApiError.ApiError)
    expect((e as ApiError.ApiError).status.message).toMatch(/at least one of stdin, stdout, stderr/)
  })
  it.each([
    ["ports=80", [80]],
    ["ports=80,443", [80, 443]],
    ["ports=80&ports=8080", [80, 8080]]
  ])("ports of %s", (query, expected) => {
    expect(PodStreams.parsePorts(new URLSearchParams(query))).toEqual(expected)
  })
  it.each(["ports=0", "ports=70000", "ports=http", "ports=80,"])("refuses %s naming the field", (query) => {
    const e = PodStreams.parsePorts(new URLSearchParams(query))
    expect(e).toBeInstanceOf(ApiError.ApiError)
    expect((e as ApiError.ApiError).status.code).toBe(422)
    expect((e as ApiError.ApiError).status.message).toMatch(/ports/)
  })
})

/** A socket fed by `incoming`, recording what is sent. */
const socketOf = (incoming: ReadonlyArray<Uint8Array>, keepOpen = false) => {
  const sent: Array<Uint8Array> = []
  let closed: number | undefined
  let release: (() => void) | undefined
  const socket: MessageSocket = {
    send: async (m) => void sent.push(m),
    buffered: () => 0,
    messages: {
      async *[Symbol.asyncIterator]() {
        for (const m of incoming) yield m
        if (keepOpen) await new Promise<void>((r) => (release = r))
      }
    },
    close: (code = 1000) => {
      closed ??= code
      release?.()
    }
  }
  return { socket, sent, closed: () => closed }
}

/** A session echoing stdin to stdout, ending with `exitCode` once stdin ends. */
const echo = (exitCode: number) => {
  const out = StreamSession.queue()
  const received: Array<StreamSession.Frame> = []
  let closed = false
  const session: StreamSession.StreamSession = {
    send: (f) => {
      received.push(f)
      if (f.channel === StreamSession.Channel.stdin) out.push({ channel: StreamSession.Channel.stdout, data: f.data })
      if (f.channel === StreamSession.Channel.close) {
        out.push(StreamSession.statusFrame(StreamSession.exitStatus(exitCode, ["cat"])))
        out.end()
      }
    },
    frames: out.frames,
    close: () => {
      closed = true
      out.end()
    }
  }
  return { session, received, closed: () => closed }
}

const enc = (channel: number, text: string) => StreamSession.encode(StreamSession.text(channel, text))

describe("relay", () => {
  it("forwards stdin, ends it with v5's close frame, and passes the exit Status on", async () => {
    const s = socketOf([enc(0, "hello"), StreamSession.encode(StreamSession.closeStdin)], true)
    const e = echo(3)
    const status = await PodStreams.relay(s.socket, e.session, { stdin: true, v5: true })
    expect(StreamSession.outcomeOf(status!)).toEqual({ exitCode: 3 })
    const frames = s.sent.map((m) => StreamSession.decode(m)!)
    expect(frames.map((f) => f.channel)).toEqual([1, 3])
    expect(new TextDecoder().decode(frames[0]!.data)).toBe("hello")
    expect(s.closed()).toBe(1000)
  })
  it("drops stdin the client did not ask for, and v5 close frames on v4", async () => {
    const s = socketOf([enc(0, "ignored"), StreamSession.encode(StreamSession.closeStdin), enc(4, '{"Width":80,"Height":24}')])
    const e = echo(0)
    await PodStreams.relay(s.socket, e.session, { stdin: false, v5: false })
    expect(e.received.map((f) => f.channel)).toEqual([4])
    expect(e.closed()).toBe(true)
  })
  it("closes the session when the client goes away", async () => {
    const s = socketOf([enc(0, "partial")])
    const e = echo(0)
    const status = await PodStreams.relay(s.socket, e.session, { stdin: true, v5: true })
    expect(status).toBeUndefined()
    expect(e.closed()).toBe(true)
  })
})

describe("dialPort", () => {
  const pod = { status: { hostPorts: [{ containerName: "web", name: "http", containerPort: 8080, hostPort: 31001 }, { containerName: "web", containerPort: 53, protocol: "UDP", hostPort: 31002 }] } }
  it.each<[string, unknown, number, number]>([
    ["a declared TCP port: its host port", pod, 8080, 31001],
    ["an undeclared port: as asked", pod, 9090, 9090],
    ["a UDP assignment does not serve TCP", pod, 53, 53],
    ["a pod with its own network (no hostPorts)", { status: {} }, 8080, 8080]
  ])("%s", (_, p, port, want) => {
    expect(PodStreams.dialPort(p, port)).toBe(want)
  })
})
