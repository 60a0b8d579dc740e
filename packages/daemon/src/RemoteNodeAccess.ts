/**
 * `NodeAccess` for nodes whose agent runs in another process or on another host: the request goes
 * to the agent's endpoint (the Node's InternalIP and `status.daemonEndpoints.kubeletEndpoint.Port`)
 * over HTTPS, authenticated with the server's node client certificate (see `agent/AgentEndpoint.ts`).
 *
 * The agent's serving certificate is self-signed and not verified, as kube-apiserver does not
 * verify kubelets by default; the client certificate is what protects the node. Agents that do
 * not answer get a 503 naming the node and the cause.
 */
import { ApiError, Keys, type NodeAccess, Status, type Store } from "@koder/fleet-core"
import { Effect, Stream } from "effect"
import { Agent, request } from "undici"
import * as StreamSockets from "./net/StreamSockets.js"

const obj = (v: unknown): Record<string, unknown> => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {})
const arr = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])

/** Where a Node's agent listens, from its status (pure). */
export const endpointOf = (node: Record<string, unknown>): { readonly host: string; readonly port: number } | undefined => {
  const status = obj(node["status"])
  const addresses = arr(status["addresses"]).map(obj)
  const host = String((addresses.find((a) => a["type"] === "InternalIP") ?? addresses.find((a) => a["type"] === "Hostname"))?.["address"] ?? "")
  const port = Number(obj(obj(status["daemonEndpoints"])["kubeletEndpoint"])["Port"] ?? 0)
  return host === "" || !Number.isInteger(port) || port <= 0 ? undefined : { host, port }
}

/** The agent's streaming endpoints speak the frames of core's StreamSession under this name. */
export const streamProtocol = "v5.channel.k8s.io"

/** Reach agents with `client` (the server's node client certificate), finding them through `store` (nodes are stored as they are). */
export const make = (store: Store.StoreService, client: { readonly cert: string; readonly key: string }): NodeAccess.NodeAccess => {
  const dispatcher = new Agent({ connect: { cert: client.cert, key: client.key, rejectUnauthorized: false }, connectTimeout: 5_000 })
  const wsOptions = { cert: client.cert, key: client.key, rejectUnauthorized: false }
  const unreachable = (node: string, why: string) => ApiError.of(Status.serviceUnavailable(`cannot reach node ${JSON.stringify(node)}: ${why}`))

  const base = (t: NodeAccess.Target) =>
    Effect.gen(function* () {
      const kv = yield* store.get(Keys.object({ group: "", resource: "nodes", name: t.node })).pipe(Effect.mapError(() => unreachable(t.node, "no such Node")))
      const endpoint = endpointOf(JSON.parse(kv.value) as Record<string, unknown>)
      if (endpoint === undefined) return yield* Effect.fail(unreachable(t.node, "the Node has no InternalIP and agent port in its status"))
      const host = endpoint.host.includes(":") ? `[${endpoint.host}]` : endpoint.host
      const path = [t.namespace, t.pod, t.uid, t.container].map(encodeURIComponent).join("/")
      return `https://${host}:${endpoint.port}/v1/pods/${path}`
    })

  // A Status the agent answered is passed through; anything else is the node being unreachable.
  const failure = async (node: string, statusCode: number, body: { text: () => Promise<string> }): Promise<ApiError.ApiError> => {
    const text = await body.text().catch(() => "")
    try {
      const status = JSON.parse(text) as Status.Status
      if (status.kind === "Status") return ApiError.of(status)
    } catch {
      // not a Status
    }
    return unreachable(node, `the agent answered ${statusCode}`)
  }

  const call = (t: NodeAccess.Target, url: string, init: { method: "GET" | "POST"; body?: string }) =>
    Effect.tryPromise({
      try: async (signal) => {
        const r = await request(url, { ...init, dispatcher, signal, headers: init.body === undefined ? {} : { "content-type": "application/json" } })
        if (r.statusCode !== 200) throw await failure(t.node, r.statusCode, r.body)
        return r
      },
      catch: (e) => (e instanceof ApiError.ApiError ? e : unreachable(t.node, e instanceof Error ? e.message : String(e)))
    })

  return {
    logs: (t, o) =>
      Effect.gen(function* () {
        const query = new URLSearchParams()
        if (o.follow) query.set("follow", "true")
        if (o.previous) query.set("previous", "true")
        if (o.timestamps) query.set("timestamps", "true")
        if (o.tailLines !== undefined) query.set("tailLines", String(o.tailLines))
        if (o.sinceSeconds !== undefined) query.set("sinceSeconds", String(o.sinceSeconds))
        if (o.limitBytes !== undefined) query.set("limitBytes", String(o.limitBytes))
        const url = `${yield* base(t)}/log?${query}`
        const r = yield* call(t, url, { method: "GET" })
        return Stream.fromAsyncIterable(r.body as AsyncIterable<Uint8Array>, () => undefined).pipe(
          Stream.map((chunk) => new Uint8Array(chunk)),
          Stream.catchAll(() => Stream.empty),
          Stream.ensuring(Effect.sync(() => r.body.destroy()))
        )
      }),
    exec: (t, o) =>
      Effect.gen(function* () {
        const r = yield* call(t, `${yield* base(t)}/exec`, { method: "POST", body: JSON.stringify(o) })
        return (yield* Effect.promise(() => r.body.json())) as NodeAccess.ExecResult
      }),
    signal: (t, s) =>
      Effect.gen(function* () {
        const r = yield* call(t, `${yield* base(t)}/signal`, { method: "POST", body: JSON.stringify({ signal: s }) })
        yield* Effect.promise(() => r.body.dump())
      }),
    execStream: (t, r) =>
      Effect.gen(function* () {
        const query = new URLSearchParams()
        for (const c of r.command) query.append("command", c)
        if (r.stdin) query.set("stdin", "true")
        if (r.tty) query.set("tty", "true")
        const url = `${(yield* base(t)).replace(/^https:/, "wss:")}/exec?${query}`
        return StreamSockets.sessionOn(yield* StreamSockets.open(url, streamProtocol, wsOptions, (why) => unreachable(t.node, why)))
      }),
    attach: (t, r) =>
      Effect.gen(function* () {
        const query = new URLSearchParams()
        if (r.stdin) query.set("stdin", "true")
        if (r.tty) query.set("tty", "true")
        const url = `${(yield* base(t)).replace(/^https:/, "wss:")}/attach?${query}`
        return StreamSockets.sessionOn(yield* StreamSockets.open(url, streamProtocol, wsOptions, (why) => unreachable(t.node, why)))
      }),
    portForward: (t, port) =>
      Effect.gen(function* () {
        const query = new URLSearchParams({ port: String(port), podIP: t.podIP ?? "" })
        const url = `${(yield* base(t)).replace(/^https:/, "wss:")}/portforward?${query}`
        return StreamSockets.connectionOn(yield* StreamSockets.open(url, streamProtocol, wsOptions, (why) => unreachable(t.node, why)))
      }),
    processes: (t) =>
      Effect.gen(function* () {
        const r = yield* call(t, `${yield* base(t)}/processes`, { method: "GET" })
        return (yield* Effect.promise(() => r.body.json())) as NodeAccess.ContainerProcesses
      })
  }
}
