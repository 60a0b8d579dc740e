/**
 * The node's userspace Service proxy (DESIGN §8, unprivileged host mode): TCP listeners on the
 * node ports of NodePort/LoadBalancer Services and on load-balancer addresses, as core's
 * `ServiceProxies.plan` lists them, each forwarding connections to the Service's ready
 * endpoints (`ServiceBackends`), round-robin.
 *
 *   catalog change ─▶ plan ─▶ open new listeners · close gone ones (their connections stay)
 *   connection ─▶ backends now ─▶ next in turn ─▶ refused/timed out? try the next ─▶ splice both ways
 *
 * Backends are read when a connection arrives, so endpoint changes apply to the next connection
 * and never cut an established one; a listener that goes away stops accepting, and what it
 * accepted runs to its end. A backend that just failed is tried last for a few seconds, so a
 * killed replica costs one failed dial, not one per connection. A listener that cannot be bound
 * (the port taken, a privileged port without root, an address this host does not have) is
 * reported once and retried on later changes.
 */
import { ServiceBackends, type ServiceCatalog, ServiceProxies } from "@koder/fleet-core"
import { Effect, type Scope } from "effect"
import { connect, createServer, type Server, type Socket } from "node:net"

/** How the proxy runs. */
export interface Options {
  readonly catalog: ServiceCatalog.ServiceCatalog
  /** Where node ports listen (undefined: none, e.g. `--nodeport-address off`). */
  readonly nodeAddress: string | undefined
  /** Whether to proxy load-balancer addresses (default true). */
  readonly loadBalancers?: boolean
  /** How long to wait for a backend to accept (default 2 s). */
  readonly connectTimeoutMs?: number
  readonly log?: (line: string) => void
}

/** A running proxy. */
export interface ServiceProxy {
  /** The listeners open now. */
  readonly listening: () => ReadonlyArray<ServiceProxies.Listener>
  /** Re-plan now (the catalog's changes do this on their own). */
  readonly sync: () => Promise<void>
}

interface Open {
  listener: ServiceProxies.Listener
  readonly server: Server
  turn: number
}

/** How long a backend that failed is tried last. */
const penaltyMs = 5000

/** Start the proxy in the current scope. */
export const make = (options: Options): Effect.Effect<ServiceProxy, never, Scope.Scope> =>
  Effect.gen(function* () {
    const log = options.log ?? ((line: string) => console.error(line))
    const connectTimeoutMs = options.connectTimeoutMs ?? 2000
    const open = new Map<string, Open>()
    const failing = new Map<string, string>()
    // Conflicts already logged, so each is reported once while it lasts.
    const reportedConflicts = new Set<string>()
    const penalized = new Map<string, number>()
    const connections = new Set<Socket>()
    let closed = false

    const backendsOf = (l: ServiceProxies.Listener): ReadonlyArray<ServiceBackends.Backend> => {
      const service = options.catalog.service(l.namespace, l.service)
      if (service === undefined) return []
      return ServiceBackends.usable(ServiceBackends.backends(options.catalog.slices(l.namespace, l.service), { name: l.portName, protocol: "TCP" }))
    }

    const dial = (b: ServiceBackends.Backend) =>
      new Promise<Socket>((resolve, reject) => {
        const upstream = connect({ host: b.address, port: b.port, allowHalfOpen: true })
        const timer = setTimeout(() => upstream.destroy(new Error(`connect to ${ServiceBackends.hostPort(b)} timed out`)), connectTimeoutMs)
        upstream.once("connect", () => {
          clearTimeout(timer)
          upstream.removeAllListeners("error")
          resolve(upstream)
        })
        upstream.once("error", (e) => {
          clearTimeout(timer)
          reject(e)
        })
      })

    const splice = (client: Socket, upstream: Socket) => {
      connections.add(upstream)
      upstream.on("close", () => connections.delete(upstream))
      const end = () => {
        client.destroy()
        upstream.destroy()
      }
      client.on("error", end)
      upstream.on("error", end)
      client.on("close", () => upstream.destroy())
      upstream.on("close", () => client.destroy())
      client.pipe(upstream)
      upstream.pipe(client)
      client.resume()
    }

    const accept = (entry: Open) => async (client: Socket) => {
      connections.add(client)
      client.on("close", () => connections.delete(client))
      client.on("error", () => client.destroy())
      client.pause()
      const all = backendsOf(entry.listener)
      if (all.length === 0) return void client.destroy()
      // Round-robin from this listener's turn; backends that failed lately go last.
      const start = entry.turn++ % all.length
      const rotated = [...all.slice(start), ...all.slice(0, start)]
      const now = Date.now()
      const healthy = rotated.filter((b) => (penalized.get(ServiceBackends.hostPort(b)) ?? 0) <= now)
      const order = [...healthy, ...rotated.filter((b) => !healthy.includes(b))]
      for (const b of order) {
        if (client.destroyed) return
        try {
          const upstream = await dial(b)
          penalized.delete(ServiceBackends.hostPort(b))
          if (client.destroyed) return void upstream.destroy()
          return splice(client, upstream)
        } catch {
          penalized.set(ServiceBackends.hostPort(b), Date.now() + penaltyMs)
        }
      }
      client.destroy()
    }

    const listen = (l: ServiceProxies.Listener) =>
      new Promise<void>((resolve, reject) => {
        const entry: Open = { listener: l, server: createServer({ allowHalfOpen: true, pauseOnConnect: true }), turn: 0 }
        entry.server.on("connection", (s: Socket) => void accept(entry)(s))
        entry.server.once("error", reject)
        entry.server.listen(l.port, l.host, () => {
          entry.server.off("error", reject)
          entry.server.on("error", (e) => log(`service proxy: ${l.key} (${l.namespace}/${l.service}): ${e.message}`))
          open.set(l.key, entry)
          resolve()
        })
      })

    let running: Promise<void> = Promise.resolve()
    let again = false
    const reconcile = async () => {
      const { listeners, conflicts } = ServiceProxies.plan(options.catalog.services(), {
        nodeAddress: options.nodeAddress,
        loadBalancers: options.loadBalancers ?? true
      })
      const wanted = new Map(listeners.map((l) => [l.key, l]))
      for (const [key, entry] of open) {
        const l = wanted.get(key)
        if (l !== undefined) entry.listener = l
        else {
          // Stop accepting; accepted connections run to their end.
          open.delete(key)
          entry.server.close()
        }
      }
      for (const [key, l] of wanted) {
        if (open.has(key) || closed) continue
        try {
          await listen(l)
          if (failing.delete(key)) log(`service proxy: now listening on ${key} for ${l.namespace}/${l.service}`)
        } catch (e) {
          const why = e instanceof Error ? e.message : String(e)
          if (failing.get(key) !== why) log(`service proxy: cannot listen on ${key} for ${l.kind} Service ${l.namespace}/${l.service}: ${why}`)
          failing.set(key, why)
        }
      }
      for (const key of failing.keys()) if (!wanted.has(key)) failing.delete(key)
      const conflicting = new Set(conflicts.map((c) => c.key))
      for (const key of reportedConflicts) if (!conflicting.has(key)) reportedConflicts.delete(key)
      for (const c of conflicts) {
        if (!reportedConflicts.has(c.key)) log(`service proxy: ${c.key} is already taken by an older Service; ${c.namespace}/${c.service} is not proxied there`)
        reportedConflicts.add(c.key)
      }
    }
    // One reconcile at a time; changes during one make one more.
    const sync = (): Promise<void> => {
      if (again) return running
      again = true
      running = running.then(() => {
        again = false
        return reconcile()
      })
      return running
    }

    yield* options.catalog.synced
    yield* Effect.promise(sync)
    const unsubscribe = options.catalog.onChange(() => void sync())
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        closed = true
        unsubscribe()
        await running
        const closing = [...open.values()].map((e) => new Promise<void>((r) => e.server.close(() => r())))
        for (const c of connections) c.destroy()
        open.clear()
        await Promise.all(closing)
      })
    )
    return { listening: () => [...open.values()].map((e) => e.listener), sync }
  })
