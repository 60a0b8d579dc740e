/**
 * The streaming pod subresources over WebSocket, as kubectl ≥ 1.30 and `@kubernetes/client-node`
 * speak them: `pods/exec` and `pods/attach` on `v5.channel.k8s.io` (or `v4`), and
 * `pods/portforward` on `v5`/`v4` channels (client-node) or as SPDY/3.1 tunnelled in WebSocket
 * messages (`SPDY/3.1+portforward.k8s.io`, kubectl; the SPDY session itself is the daemon's,
 * passed in as a `Tunnel`, since core has no zlib).
 *
 * The gates are those of the one-shot exec (PodExec.ts): RBAC (`exec` on pods/exec and
 * pods/attach, `create` on pods/portforward; see Authz), a ProcessControl consent, and a CONNECT
 * through admission. The audit Event is written when the session ends, with its outcome.
 *
 *   exec  GET .../pods/{name}/exec?command=sh&command=-c&command=...&container=&stdin=&stdout=&stderr=&tty=
 *   attach GET .../pods/{name}/attach?container=&stdin=&stdout=&stderr=&tty=
 *   portforward GET .../pods/{name}/portforward?ports=8080,9090
 *
 * Port-forward on channels (as the kubelet's WebSocket server): port i has data channel 2i and
 * error channel 2i+1; the first message on each is the port as two little-endian bytes.
 */
import { Effect, Exit, Runtime as EffectRuntime } from "effect"
import * as FieldError from "../model/FieldError.js"
import * as Status from "../model/Status.js"
import * as StreamSession from "../runtime/StreamSession.js"
import { asArray, asObject } from "../object/Json.js"
import type { SubresourceHandler } from "./ApiServer.js"
import * as ApiError from "./ApiError.js"
import { offeredProtocols, type ApiRequest, type ByteConnection, type MessageSocket, type UpgradeResponse } from "./Http.js"
import type * as NodeAccess from "./NodeAccess.js"
import * as PodExec from "./PodExec.js"

/** The channel protocols served, most preferred first. */
export const channelProtocols = ["v5.channel.k8s.io", "v4.channel.k8s.io"] as const
/** kubectl's port-forward: SPDY/3.1 carried in binary WebSocket messages. */
export const spdyTunnelProtocol = "SPDY/3.1+portforward.k8s.io"

/**
 * A SPDY port-forward session on `socket` (the daemon's): each data stream the client opens is
 * connected with `open(port)`; a failure's message goes back on the stream's error stream.
 * Resolves when the session ends; `ports` are those forwarded.
 */
export type Tunnel = (socket: MessageSocket, open: (port: number) => Promise<ByteConnection>) => Promise<{ readonly ports: ReadonlyArray<number>; readonly connections: number }>

const exec: ReadonlyArray<string> = channelProtocols
const bool = (q: URLSearchParams, name: string): boolean => {
  const v = q.get(name)
  return v === "true" || v === "1"
}

/** Pick the subprotocol, or a 400 naming what is served. */
const choose = (request: ApiRequest, served: ReadonlyArray<string>): Effect.Effect<string, ApiError.ApiError> => {
  const offered = offeredProtocols(request)
  const chosen = served.find((p) => offered.includes(p))
  if (chosen !== undefined) return Effect.succeed(chosen)
  return Effect.fail(
    ApiError.badRequest(
      offered.length === 0
        ? `a WebSocket subprotocol is required; this server speaks ${served.join(", ")}`
        : `none of the offered subprotocols (${offered.join(", ")}) is served; this server speaks ${served.join(", ")}`
    )
  )
}

const isSpdy = (request: ApiRequest): boolean => (request.headers["upgrade"] ?? "").toLowerCase().startsWith("spdy")

/**
 * SPDY upgrades (kubectl before 1.30, or its fallback after a refused WebSocket) get a clear
 * refusal, once the gates have run: a fallback then shows why the WebSocket was refused.
 */
const refuseSpdy = (request: ApiRequest, sub: string): Effect.Effect<void, ApiError.ApiError> =>
  isSpdy(request)
    ? Effect.fail(ApiError.badRequest(`pods/${sub} over SPDY is not supported: use a client that speaks WebSocket (kubectl 1.30 or later, ${channelProtocols.join(", ")})`))
    : Effect.void

/** Streams asked for in the query (pure): stdin/stdout/stderr/tty, at least one of the three streams. */
export const parseStreams = (q: URLSearchParams, kind: string): { readonly stdin: boolean; readonly stdout: boolean; readonly stderr: boolean; readonly tty: boolean } | ApiError.ApiError => {
  const stdin = bool(q, "stdin")
  const stdout = bool(q, "stdout")
  const tty = bool(q, "tty")
  const stderr = bool(q, "stderr") && !tty
  if (!stdin && !stdout && !bool(q, "stderr")) return ApiError.of(Status.invalid({ group: "", kind }, "", [FieldError.required("stdin", "you must specify at least one of stdin, stdout, stderr")]))
  return { stdin, stdout, stderr, tty }
}

/** The ports of a channel port-forward (pure): `ports=80,443` or repeated. */
export const parsePorts = (q: URLSearchParams): ReadonlyArray<number> | ApiError.ApiError => {
  const raw = q.getAll("ports").flatMap((p) => p.split(","))
  const ports = raw.map((p) => Number(p.trim()))
  const bad = raw.find((_, i) => !(Number.isInteger(ports[i]) && ports[i]! > 0 && ports[i]! < 65536))
  if (bad !== undefined) return ApiError.of(Status.invalid({ group: "", kind: "PodPortForwardOptions" }, "", [FieldError.invalid("ports", bad, "must be a port number between 1 and 65535")]))
  return ports
}

const upgrade = (protocol: string, serve: UpgradeResponse["serve"]): UpgradeResponse => ({ _tag: "Upgrade", status: 101, headers: {}, protocol, serve })

// Past this many bytes the socket has not written, the relay waits for it (the client's pace).
const highWater = 1 << 20

const sendPaced = async (socket: MessageSocket, message: Uint8Array): Promise<void> => {
  const sent = socket.send(message)
  if (socket.buffered() > highWater) await sent
}

/**
 * Relay frames between a client's socket and a session until either ends (plain TS: this is the
 * byte path). Resolves with the session's error frame, if it sent one.
 */
export const relay = async (
  socket: MessageSocket,
  session: StreamSession.StreamSession,
  options: { readonly stdin: boolean; readonly v5: boolean; readonly stdout?: boolean; readonly stderr?: boolean }
): Promise<Uint8Array | undefined> => {
  // A stream the client did not ask for is not sent (client-node fails on a channel it has no sink for).
  const dropped = (channel: number) =>
    (channel === StreamSession.Channel.stdout && options.stdout === false) || (channel === StreamSession.Channel.stderr && options.stderr === false)
  let status: Uint8Array | undefined
  const inbound = (async () => {
    for await (const message of socket.messages) {
      const frame = StreamSession.decode(message)
      if (frame === undefined) continue
      if (frame.channel === StreamSession.Channel.stdin && !options.stdin) continue
      if (frame.channel === StreamSession.Channel.close && !options.v5) continue
      session.send(frame)
    }
    session.close()
  })()
  try {
    for await (const frame of session.frames) {
      if (frame.channel === StreamSession.Channel.error) status = frame.data
      if (dropped(frame.channel)) continue
      await sendPaced(socket, StreamSession.encode(frame))
    }
  } finally {
    socket.close(1000)
    session.close()
  }
  await inbound.catch(() => undefined)
  return status
}

const describe = (status: Uint8Array | undefined): string => {
  if (status === undefined) return "ended by the client"
  const o = StreamSession.outcomeOf(status)
  return o.exitCode !== undefined ? `exit code ${o.exitCode}` : `failed: ${o.message ?? ""}`
}

/** `pods/exec` over WebSocket (the one-shot JSON POST stays in PodExec.ts for kfleet). */
export const execStream = (access: () => NodeAccess.NodeAccess, request: ApiRequest, namespace: string, name: string, context: PodExec.Context): Effect.Effect<UpgradeResponse, ApiError.ApiError> =>
  Effect.gen(function* () {
    const q = request.query
    const command = q.getAll("command")
    if (command.length === 0) return yield* Effect.fail(ApiError.of(Status.invalid({ group: "", kind: "PodExecOptions" }, "", [FieldError.required("command", "you must specify at least one command for the container")])))
    const streams = parseStreams(q, "PodExecOptions")
    if (streams instanceof ApiError.ApiError) return yield* Effect.fail(streams)
    const protocol = isSpdy(request) ? "" : yield* choose(request, exec)
    const t = yield* PodExec.target(context, namespace, name, q.get("container") ?? "", "exec")
    yield* PodExec.consent(context, namespace, name, t.labels, { _tag: "exec" }, "exec")
    yield* PodExec.admit(context, request.user, namespace, name, "exec", { apiVersion: "v1", kind: "PodExecOptions", container: t.container, command, ...streams })
    yield* refuseSpdy(request, "exec")
    const target = { node: t.node, namespace, pod: name, uid: t.uid, container: t.container }
    const session = yield* access()
      .execStream(target, { command, stdin: streams.stdin, tty: streams.tty })
      .pipe(Effect.tapError((e) => PodExec.recordEvent(context, namespace, name, t.uid, "Exec", `${request.user.name} could not run ${JSON.stringify(command[0])} in container ${JSON.stringify(t.container)}: ${e.status.message}`, "Warning")))
    return upgrade(protocol, (socket) =>
      Effect.promise(() => relay(socket, session, { stdin: streams.stdin, stdout: streams.stdout, stderr: streams.stderr || streams.tty, v5: protocol === channelProtocols[0] })).pipe(
        Effect.onInterrupt(() => Effect.sync(() => (session.close(), socket.close(1001, "the server is shutting down")))),
        Effect.flatMap((status) =>
          PodExec.recordEvent(
            context,
            namespace,
            name,
            t.uid,
            "Exec",
            `${request.user.name} ran ${JSON.stringify(command[0])} with ${command.length - 1} argument(s) in container ${JSON.stringify(t.container)}${streams.tty ? " on a terminal" : ""}: ${describe(status)}`
          )
        )
      )
    )
  })

/** `pods/attach`, reaching nodes through `access()`. */
export const attachHandler = (access: () => NodeAccess.NodeAccess): SubresourceHandler => ({
  group: "",
  plural: "pods",
  subresource: "attach",
  handle: (request, route, context) =>
    Effect.gen(function* () {
      const method = request.method.toUpperCase()
      if (method !== "GET" && method !== "POST") return yield* Effect.fail(PodExec.methodNotAllowed(request, "attach"))
      const namespace = route.namespace ?? ""
      const name = route.name ?? ""
      const streams = parseStreams(request.query, "PodAttachOptions")
      if (streams instanceof ApiError.ApiError) return yield* Effect.fail(streams)
      const protocol = isSpdy(request) ? "" : yield* choose(request, exec)
      const t = yield* PodExec.target(context, namespace, name, request.query.get("container") ?? "", "attach")
      yield* PodExec.consent(context, namespace, name, t.labels, { _tag: "exec" }, "attach")
      yield* PodExec.admit(context, request.user, namespace, name, "attach", { apiVersion: "v1", kind: "PodAttachOptions", container: t.container, ...streams })
      yield* refuseSpdy(request, "attach")
      const target = { node: t.node, namespace, pod: name, uid: t.uid, container: t.container }
      const session = yield* access().attach(target, { stdin: streams.stdin, tty: streams.tty })
      return upgrade(protocol, (socket) =>
        Effect.promise(() => relay(socket, session, { stdin: streams.stdin, stdout: streams.stdout, stderr: streams.stderr || streams.tty, v5: protocol === channelProtocols[0] })).pipe(
          Effect.onInterrupt(() => Effect.sync(() => (session.close(), socket.close(1001, "the server is shutting down")))),
          Effect.flatMap((status) =>
            PodExec.recordEvent(context, namespace, name, t.uid, "Attach", `${request.user.name} attached to container ${JSON.stringify(t.container)}${streams.stdin ? " with stdin" : ""}: ${describe(status)}`)
          )
        )
      )
    })
})

const portBytes = (port: number): Uint8Array => Uint8Array.of(port & 0xff, port >> 8)
const encoder = new TextEncoder()

/** Channel port-forward (client-node): every port connected at once, the socket closed when all have ended. */
const forwardChannels = async (socket: MessageSocket, ports: ReadonlyArray<number>, open: (port: number) => Promise<ByteConnection>): Promise<number> => {
  // One dial per port, started at once; a client's bytes that arrive before it connected wait for
  // it (client-node sends its request as soon as the socket opens), in order.
  const dials = ports.map((port, i) =>
    (async () => {
      await socket.send(StreamSession.encode({ channel: 2 * i, data: portBytes(port) }))
      await socket.send(StreamSession.encode({ channel: 2 * i + 1, data: portBytes(port) }))
      return open(port).catch(async (e: unknown) => {
        await socket.send(StreamSession.encode({ channel: 2 * i + 1, data: encoder.encode(e instanceof Error ? e.message : String(e)) }))
        return undefined
      })
    })()
  )
  let connected = 0
  const pumps = dials.map(async (dial, i) => {
    const conn = await dial
    if (conn === undefined) return
    connected++
    for await (const bytes of conn.data) await sendPaced(socket, StreamSession.encode({ channel: 2 * i, data: bytes }))
  })
  const inbound = (async () => {
    for await (const message of socket.messages) {
      const frame = StreamSession.decode(message)
      if (frame === undefined || frame.channel % 2 !== 0) continue
      const conn = await dials[frame.channel / 2]
      await conn?.write(frame.data)
    }
  })()
  await Promise.race([Promise.allSettled(pumps), inbound.catch(() => undefined)])
  for (const dial of dials) void dial.then((c) => c?.close())
  socket.close(1000)
  return connected
}

/**
 * Where a forwarded port is dialled (pure): a host-network pod's declared TCP container port is
 * served at the host port the agent gave it (`status.hostPorts`); any other port as asked.
 */
export const dialPort = (pod: unknown, port: number): number => {
  const assigned = asArray(asObject(asObject(pod)["status"])["hostPorts"]).map(asObject)
  const hit = assigned.find((a) => a["containerPort"] === port && (a["protocol"] === undefined || a["protocol"] === "TCP"))
  return typeof hit?.["hostPort"] === "number" ? hit["hostPort"] : port
}

/** `pods/portforward`, reaching nodes through `access()`; SPDY tunnels through `tunnel` (absent: channels only). */
export const portForwardHandler = (access: () => NodeAccess.NodeAccess, tunnel?: Tunnel): SubresourceHandler => ({
  group: "",
  plural: "pods",
  subresource: "portforward",
  handle: (request, route, context) =>
    Effect.gen(function* () {
      const method = request.method.toUpperCase()
      if (method !== "GET" && method !== "POST") return yield* Effect.fail(PodExec.methodNotAllowed(request, "portforward"))
      const namespace = route.namespace ?? ""
      const name = route.name ?? ""
      const protocol = isSpdy(request) ? spdyTunnelProtocol : yield* choose(request, tunnel === undefined ? exec : [spdyTunnelProtocol, ...exec])
      const ports = protocol === spdyTunnelProtocol ? [] : parsePorts(request.query)
      if (ports instanceof ApiError.ApiError) return yield* Effect.fail(ports)
      if (protocol !== spdyTunnelProtocol && ports.length === 0) return yield* Effect.fail(ApiError.of(Status.invalid({ group: "", kind: "PodPortForwardOptions" }, "", [FieldError.required("ports", "at least one port is required")])))
      const t = yield* PodExec.target(context, namespace, name, "", "portforward")
      yield* PodExec.consent(context, namespace, name, t.labels, { _tag: "portforward" }, "portforward")
      yield* PodExec.admit(context, request.user, namespace, name, "portforward", { apiVersion: "v1", kind: "PodPortForwardOptions", ports: [...ports] })
      yield* refuseSpdy(request, "portforward")
      const target = { node: t.node, namespace, pod: name, uid: t.uid, container: t.container, podIP: t.podIP }
      const runtime = yield* Effect.runtime<never>()
      const open = async (port: number): Promise<ByteConnection> => {
        const exit = await EffectRuntime.runPromiseExit(runtime)(access().portForward(target, dialPort(t.pod, port)))
        if (Exit.isSuccess(exit)) return exit.value
        const failure = exit.cause._tag === "Fail" ? exit.cause.error.status.message : "the node did not answer"
        throw new Error(`error forwarding port ${port} to pod ${name}, uid ${t.uid}: ${failure}`)
      }
      return upgrade(protocol, (socket) =>
        Effect.promise(async () => {
          if (protocol === spdyTunnelProtocol && tunnel !== undefined) return tunnel(socket, open)
          return { ports, connections: await forwardChannels(socket, ports, open) }
        }).pipe(
          Effect.onInterrupt(() => Effect.sync(() => socket.close(1001, "the server is shutting down"))),
          Effect.flatMap((done) =>
            PodExec.recordEvent(
              context,
              namespace,
              name,
              t.uid,
              "PortForward",
              `${request.user.name} forwarded port(s) ${[...new Set(done.ports)].sort((a, b) => a - b).join(", ") || "none"} of the pod (${done.connections} connection(s))`
            )
          )
        )
      )
    })
})

/**
 * `pods/exec`: a WebSocket (or SPDY) upgrade streams, anything else is the one-shot JSON exec
 * of PodExec.ts.
 */
export const execHandler = (access: () => NodeAccess.NodeAccess): SubresourceHandler => {
  const oneShot = PodExec.execHandler(access)
  return {
    group: "",
    plural: "pods",
    subresource: "exec",
    handle: (request, route, context) => {
      const method = request.method.toUpperCase()
      if (request.headers["upgrade"] === undefined || (method !== "GET" && method !== "POST")) return oneShot.handle(request, route, context)
      return execStream(access, request, route.namespace ?? "", route.name ?? "", context)
    }
  }
}
