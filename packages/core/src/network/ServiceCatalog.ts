/**
 * The cluster's Services and EndpointSlices as the data-path components see them (DNS, the
 * node-port and load-balancer proxies): two informers (one list+watch each, served by the API's
 * watch cache), slices indexed by the Service they belong to, and a change signal. A server
 * builds it on its in-process client, an agent on its node-credential client (`system:node` may
 * list and watch both).
 *
 *   Client ─▶ Informer(Service) ─┐
 *   Client ─▶ Informer(EndpointSlice) ─┴─▶ service(ns, name) · services() · slices(ns, name) · onChange
 */
import { Effect, type Scope } from "effect"
import type * as Client from "../client/Client.js"
import * as Informer from "../informer/Informer.js"
import type * as DnsRecords from "./DnsRecords.js"
import * as ServiceBackends from "./ServiceBackends.js"
import { type JsonObject } from "../object/Json.js"
import { labelsOf, namespaceOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"



/** A live view of Services and their slices. */
export interface ServiceCatalog extends DnsRecords.View {
  /** Every Service. */
  readonly services: () => ReadonlyArray<JsonObject>
  /** Call `handler` (coalesced, never re-entrant) after any Service or slice change; answers an unsubscribe. */
  readonly onChange: (handler: () => void) => () => void
  /** Waits until both informers have listed once. */
  readonly synced: Effect.Effect<void>
}

const sliceOwner = (slice: JsonObject): string | undefined => {
  const name = labelsOf(slice)[ServiceBackends.serviceNameLabel]
  return typeof name === "string" && name !== "" ? `${namespaceOf(slice)}/${name}` : undefined
}

/** Start the catalog's informers on `client` in the current scope. */
export const make = (client: Client.Client): Effect.Effect<ServiceCatalog, never, Scope.Scope> =>
  Effect.gen(function* () {
    const services = yield* Informer.make(client, ResourceRefs.Service)
    const slices = yield* Informer.make(client, ResourceRefs.EndpointSlice)
    // Slice keys by owning Service, kept from the slice informer's changes.
    const byService = new Map<string, Map<string, JsonObject>>()
    const handlers = new Set<() => void>()
    let scheduled = false
    const notify = () => {
      if (scheduled || handlers.size === 0) return
      scheduled = true
      // One call per burst of changes (a rollout rewrites many slices at once).
      queueMicrotask(() => {
        scheduled = false
        for (const h of handlers) h()
      })
    }
    const index = (slice: JsonObject, add: boolean) => {
      const owner = sliceOwner(slice)
      if (owner === undefined) return
      const key = Informer.keyOf(slice)
      let m = byService.get(owner)
      if (add) {
        if (m === undefined) byService.set(owner, (m = new Map()))
        m.set(key, slice)
      } else if (m !== undefined) {
        m.delete(key)
        if (m.size === 0) byService.delete(owner)
      }
    }
    const unsubscribeSlices = slices.subscribe((change) => {
      if (change.old !== undefined) index(change.old, false)
      index(change.object, change.type !== "DELETED")
      notify()
    })
    const unsubscribeServices = services.subscribe(notify)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        unsubscribeSlices()
        unsubscribeServices()
        handlers.clear()
      })
    )
    return {
      service: (namespace, name) => services.get(namespace, name),
      services: () => services.list(),
      slices: (namespace, name) => [...(byService.get(`${namespace}/${name}`)?.values() ?? [])],
      hasNamespace: (namespace) => services.list(namespace).length > 0,
      onChange: (handler) => {
        handlers.add(handler)
        return () => void handlers.delete(handler)
      },
      synced: Effect.zipRight(services.synced, slices.synced)
    }
  })
