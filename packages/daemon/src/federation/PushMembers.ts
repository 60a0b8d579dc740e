/**
 * Push mode on the hub (Karmada's Push clusters): for each MemberCluster with `syncMode: Push`,
 * the hub reads the member's kubeconfig from the Secret in `spec.secretRef` (key `kubeconfig`),
 * dials `spec.apiEndpoint` with it, and runs the same MemberAgent a Pull member runs — heartbeat,
 * status, Works — with the roles of the two clients swapped. The member's connection is put in
 * the hub's registry for the proxy and aggregated reads.
 *
 * Double opt-in holds: the member's administrator hands out a kubeconfig (one that may impersonate
 * users, for the proxy), and the hub's creates the MemberCluster and its Secret. A changed spec or
 * Secret restarts the member's agent with the new settings; a deleted entry stops it.
 */
import { Client, Federation, Informer, type MemberConnections, MemberAgent, Metadata, ResourceRefs } from "@koder/fleet-core"
import { Duration, Effect, Exit, Schedule, Scope } from "effect"
import { Agent as UndiciAgent, fetch as undiciFetch, request as undiciRequest } from "undici"
import { parse } from "yaml"

/** What the hub dials a Push member with. */
export interface Credentials {
  readonly server: string
  readonly ca: string | undefined
  readonly token: string | undefined
  readonly cert: string | undefined
  readonly key: string | undefined
}

const decode64 = (v: unknown) => (typeof v === "string" && v !== "" ? Buffer.from(v, "base64").toString("utf8") : undefined)

/** The current context's server, CA and user credentials of a kubeconfig (pure), or why not. */
export const credentialsOf = (text: string): Credentials | string => {
  let doc: Record<string, unknown>
  try {
    doc = (parse(text) ?? {}) as Record<string, unknown>
  } catch (e) {
    return `the kubeconfig is not YAML: ${e instanceof Error ? e.message : String(e)}`
  }
  const named = (list: string, name: unknown) =>
    (Array.isArray(doc[list]) ? (doc[list] as Array<Record<string, unknown>>) : []).find((i) => i?.["name"] === name)
  const contexts = Array.isArray(doc["contexts"]) ? (doc["contexts"] as Array<Record<string, unknown>>) : []
  const context = (named("contexts", doc["current-context"]) ?? contexts[0])?.["context"] as Record<string, unknown> | undefined
  if (context === undefined) return "the kubeconfig has no context"
  const cluster = named("clusters", context["cluster"])?.["cluster"] as Record<string, unknown> | undefined
  const user = (named("users", context["user"])?.["user"] ?? {}) as Record<string, unknown>
  if (cluster === undefined || typeof cluster["server"] !== "string") return `the kubeconfig's context names no cluster with a server`
  const token = typeof user["token"] === "string" ? user["token"] : undefined
  const cert = decode64(user["client-certificate-data"])
  const key = decode64(user["client-key-data"])
  if (token === undefined && (cert === undefined || key === undefined)) return "the kubeconfig's user has neither a token nor client-certificate-data and client-key-data"
  return { server: cluster["server"], ca: decode64(cluster["certificate-authority-data"]), token, cert, key }
}

/** A connection to the member's API with these credentials (impersonation headers kept one per line). */
const connect = (endpoint: string, c: Credentials): { readonly client: Client.Client; readonly connection: MemberConnections.Connection; readonly close: () => Promise<void> } => {
  const dispatcher = new UndiciAgent({ connect: { ...(c.ca === undefined ? {} : { ca: c.ca }), ...(c.cert === undefined ? {} : { cert: c.cert, key: c.key }) } })
  const fetch = ((input: string, init?: RequestInit) => undiciFetch(input, { ...(init as object), dispatcher })) as unknown as typeof globalThis.fetch
  const base = endpoint.replace(/\/$/, "")
  const client = Client.make({ server: base, ...(c.token === undefined ? {} : { token: c.token }), fetch })
  const connection: MemberConnections.Connection = {
    mode: "Push",
    request: async (r) => {
      const headers: Array<string> = []
      for (const [name, value] of Object.entries(r.headers)) for (const v of value.split("\n")) headers.push(name, v)
      if (c.token !== undefined) headers.push("authorization", `Bearer ${c.token}`)
      const response = await undiciRequest(`${base}${r.path}`, {
        method: r.method as "GET",
        headers,
        ...(r.body === undefined ? {} : { body: r.body }),
        dispatcher,
        headersTimeout: 30_000,
        bodyTimeout: 30_000
      })
      const body = new Uint8Array(await response.body.arrayBuffer())
      const out: Record<string, string> = {}
      for (const [k, v] of Object.entries(response.headers)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(", ") : v
      return { status: response.statusCode, headers: out, body }
    }
  }
  return { client, connection, close: () => dispatcher.close() }
}

/**
 * The cluster beside a co-located hub (`--hub`): registered as a Push member under its name and
 * reached in-process, as its own control plane, with no kubeconfig.
 */
export interface Local {
  readonly member: string
  readonly region: string
  /** Its API's address as clients dial it (the MemberCluster's apiEndpoint). */
  readonly endpoint: string
  readonly client: Client.Client
  readonly answer: MemberConnections.Connection["request"]
  /** The Fleet version it reports (the hub's own: one process). */
  readonly version: string
}

/** How the Push members are run. */
export interface Options {
  /** The hub's own API (the control plane's loopback client). */
  readonly hub: Client.Client
  readonly connections: MemberConnections.Registry
  readonly local?: Local
  readonly heartbeatMs?: number
  readonly onError?: (message: string) => void
}

interface Running {
  readonly key: string
  readonly scope: Scope.CloseableScope
}

/** Write the member's Joined condition (the hub's word in Push mode). */
const joined = (hub: Client.Client, member: string, ok: boolean, reason: string, message: string) =>
  hub.get(ResourceRefs.MemberCluster, undefined, member).pipe(
    Effect.flatMap((mc) => {
      const status = (mc["status"] ?? {}) as { conditions?: ReadonlyArray<Record<string, unknown>> }
      const before = (status.conditions ?? []).find((c) => c["type"] === "Joined")
      const want = ok ? "True" : "False"
      if (before?.["status"] === want && before["reason"] === reason) return Effect.void
      const condition = { type: "Joined", status: want, reason, message, lastTransitionTime: Metadata.rfc3339(Date.now()) }
      return hub.patch(ResourceRefs.MemberCluster, undefined, member, "merge", { status: { conditions: [...(status.conditions ?? []).filter((c) => c["type"] !== "Joined"), condition] } }, "status")
    }),
    Effect.ignore
  )

/** A Push member's connection, from the kubeconfig in its Secret (undefined: unusable, said in its Joined condition). */
const dial = (options: Options, mc: Federation.MemberCluster, scope: Scope.Scope) =>
  Effect.gen(function* () {
    const member = mc.metadata.name ?? ""
    const ref = mc.spec.secretRef!
    const secret = yield* Effect.either(options.hub.get(ResourceRefs.Secret, ref.namespace, ref.name))
    if (secret._tag === "Left") return yield* Effect.as(joined(options.hub, member, false, "SecretUnreadable", `secret ${ref.namespace}/${ref.name}: ${secret.left.status.message ?? "unreadable"}`), undefined)
    const kubeconfig = decode64(((secret.right["data"] ?? {}) as Record<string, unknown>)["kubeconfig"])
    const credentials = kubeconfig === undefined ? `secret ${ref.namespace}/${ref.name} has no kubeconfig key` : credentialsOf(kubeconfig)
    if (typeof credentials === "string") return yield* Effect.as(joined(options.hub, member, false, "KubeconfigInvalid", credentials), undefined)
    const link = connect(mc.spec.apiEndpoint ?? credentials.server, credentials)
    yield* Scope.addFinalizer(scope, Effect.promise(() => link.close().catch(() => undefined)))
    const version = yield* Effect.either(link.client.get({ apiVersion: "v1", kind: "Namespace" }, undefined, "default").pipe(Effect.timeout(Duration.seconds(10))))
    yield* joined(options.hub, member, true, "HubDialsMember", `the hub reaches ${mc.spec.apiEndpoint ?? credentials.server}${version._tag === "Left" ? " (not answering yet)" : ""}`)
    return link
  })

/** One Push member: its connection made, registered, its agent run. */
const start = (options: Options, mc: Federation.MemberCluster, scope: Scope.Scope) =>
  Effect.gen(function* () {
    const member = mc.metadata.name ?? ""
    const local = options.local?.member === member && mc.metadata.annotations?.[Federation.CoLocatedAnnotation] === "true" ? options.local : undefined
    const link = local !== undefined ? { client: local.client, connection: { mode: "Push" as const, request: local.answer } } : yield* dial(options, mc, scope)
    if (link === undefined) return
    if (local !== undefined) yield* joined(options.hub, member, true, "CoLocated", "the hub runs in the member's process")
    // Its namespace on the hub (Works, heartbeat), as the signer makes it for a Pull member.
    yield* options.hub
      .create({ apiVersion: "v1", kind: "Namespace", metadata: { name: Federation.memberNamespace(member), labels: { [Federation.MemberLabel]: member } } })
      .pipe(Effect.catchIf((e) => e.status.code === 409, () => Effect.void), Effect.ignore)
    const remove = options.connections.set(member, link.connection)
    yield* Scope.addFinalizer(scope, Effect.sync(remove))
    yield* MemberAgent.run({
      member,
      region: mc.spec.region ?? "",
      hub: options.hub,
      local: link.client,
      // A remote Push member's version is not known to the hub (it runs no agent of ours there).
      fleetVersion: local?.version ?? "push",
      ...(options.heartbeatMs === undefined ? {} : { heartbeatMs: options.heartbeatMs }),
      onError: (m) => options.onError?.(`member ${member}: ${m}`)
    }).pipe(Scope.extend(scope))
  })

/** The co-located cluster's MemberCluster, made once (an administrator's later edits stay). */
const register = (hub: Client.Client, local: Local, onError: Options["onError"]) =>
  hub
    .create({
      apiVersion: Federation.ApiVersion,
      kind: "MemberCluster",
      metadata: { name: local.member, annotations: { [Federation.CoLocatedAnnotation]: "true" } },
      spec: { syncMode: "Push", apiEndpoint: local.endpoint, region: local.region }
    })
    .pipe(
      Effect.catchIf((e) => e.status.code === 409, () => Effect.void),
      Effect.retry({ schedule: Schedule.spaced(Duration.millis(200)).pipe(Schedule.upTo(Duration.seconds(10))), while: (e) => (e.status.code ?? 500) >= 500 }),
      Effect.catchAll((e) => Effect.sync(() => onError?.(`cannot register the co-located member ${local.member}: ${e.status.message ?? e.status.reason}`)))
    )

/** Run every Push member for as long as the scope lives. */
export const run = (options: Options): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    if (options.local !== undefined) yield* register(options.hub, options.local, options.onError)
    const members = yield* Informer.make(options.hub, ResourceRefs.MemberCluster)
    const secrets = yield* Informer.make(options.hub, ResourceRefs.Secret)
    const running = new Map<string, Running>()
    const stop = (name: string) =>
      Effect.suspend(() => {
        const r = running.get(name)
        running.delete(name)
        return r === undefined ? Effect.void : Scope.close(r.scope, Exit.void)
      })
    yield* Effect.addFinalizer(() => Effect.forEach([...running.keys()], stop, { discard: true }))
    const reconcile = Effect.gen(function* () {
      const want = new Map<string, { readonly mc: Federation.MemberCluster; readonly key: string }>()
      for (const o of members.list()) {
        const mc = o as unknown as Federation.MemberCluster
        const local = options.local?.member === mc.metadata.name && mc.metadata.annotations?.[Federation.CoLocatedAnnotation] === "true"
        if (mc.spec?.syncMode !== "Push" || (mc.spec.secretRef === undefined && !local) || (o["metadata"] as { deletionTimestamp?: string }).deletionTimestamp !== undefined) continue
        const secret = mc.spec.secretRef === undefined ? undefined : secrets.get(mc.spec.secretRef.namespace, mc.spec.secretRef.name)
        want.set(mc.metadata.name ?? "", { mc, key: JSON.stringify([mc.spec.apiEndpoint, mc.spec.region, mc.spec.secretRef, (secret?.["metadata"] as { resourceVersion?: string } | undefined)?.resourceVersion]) })
      }
      for (const name of [...running.keys()]) if (want.get(name)?.key !== running.get(name)!.key) yield* stop(name)
      for (const [name, w] of want) {
        if (running.has(name)) continue
        const scope = yield* Scope.make()
        running.set(name, { key: w.key, scope })
        yield* Effect.forkIn(start(options, w.mc, scope).pipe(Effect.catchAllCause((c) => Effect.sync(() => options.onError?.(`member ${name}: ${String(c)}`)))), scope)
      }
    })
    yield* Effect.forkScoped(Effect.repeat(reconcile, Schedule.spaced(Duration.seconds(1))))
  })
