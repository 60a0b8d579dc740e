/**
 * Shared informers: one recovering list+watch per resource (served by the API server's watch
 * cache), kept as an in-memory map that every controller reads instead of the API, with handlers
 * called on each change and two indexes controllers need constantly (by namespace, and by the
 * uid of the controlling owner). Like client-go's SharedInformerFactory: many controllers, one
 * watch per resource. Pods are also indexed by the node they are bound to.
 *
 * An informer also knows the newest resourceVersion it has applied, so a controller can wait
 * until it sees its own writes before deciding again (see `Controller.ts`).
 */
import { Deferred, Effect, Fiber, FiberRef, Scope, Stream } from "effect"
import type * as Client from "../client/Client.js"
import { metadataOf } from "../object/Metadata.js"
import * as Views from "../object/Views.js"

/** A JSON object from the API. */
export type { JsonObject } from "../object/Json.js"
import type { JsonObject } from "../object/Json.js"

/** What a handler is told about one change. */
export interface Change {
  readonly type: "ADDED" | "MODIFIED" | "DELETED"
  readonly object: JsonObject
  /** The object before this change (MODIFIED and DELETED). */
  readonly old: JsonObject | undefined
}

/** A read-only view of one resource. */
export interface Informer {
  readonly ref: Client.ResourceRef
  /** The object `namespace/name` (or `name` when cluster-scoped). */
  readonly get: (namespace: string | undefined, name: string) => JsonObject | undefined
  /** Every object, or those of one namespace. */
  readonly list: (namespace?: string) => ReadonlyArray<JsonObject>
  /** The objects whose controlling owner (ownerReference with `controller: true`) has this uid. */
  readonly controlledBy: (uid: string) => ReadonlyArray<JsonObject>
  /** The objects with an ownerReference (controller or not) to this uid. */
  readonly ownedBy: (uid: string) => ReadonlyArray<JsonObject>
  /** The objects whose `spec.nodeName` is this node (pods bound to it). */
  readonly onNode: (nodeName: string) => ReadonlyArray<JsonObject>
  /** Call `handler` on every change from now on (and once per existing object); answers an unsubscribe. */
  readonly subscribe: (handler: (change: Change) => void) => () => void
  /** Waits until the first list has been applied. */
  readonly synced: Effect.Effect<void>
  /** The newest resourceVersion applied (0 before the first list). */
  readonly revision: () => number
  /** Waits until `predicate` holds (checked after every change), at most `timeoutMs`; answers whether it held. */
  readonly waitUntil: (predicate: () => boolean, timeoutMs: number) => Effect.Effect<boolean>
}

/** Informers by resource, started on first use, stopped with their scope. */
export interface Informers {
  readonly for: (ref: Client.ResourceRef) => Informer
  /** Every informer started so far. */
  readonly all: () => ReadonlyArray<Informer>
}


/** `namespace/name`, or `name` for cluster-scoped objects: the key controllers queue. */
export const keyOf = (o: JsonObject): string => {
  const m = metadataOf(o)
  const ns = m["namespace"] as string | undefined
  return ns ? `${ns}/${String(m["name"])}` : String(m["name"])
}

/** Splits a key made by `keyOf`. */
export const splitKey = (key: string): { readonly namespace: string | undefined; readonly name: string } => {
  const i = key.indexOf("/")
  return i < 0 ? { namespace: undefined, name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) }
}

interface OwnerRef {
  readonly uid?: string
  readonly controller?: boolean
}

const nodeNameOf = (o: JsonObject): string | undefined => {
  // Any kind may be indexed; only pods have `spec.nodeName`, read through the pod view without a copy.
  const n = Views.pod(o).spec?.nodeName
  return typeof n === "string" && n !== "" ? n : undefined
}

const owners = (o: JsonObject): ReadonlyArray<OwnerRef> => (metadataOf(o)["ownerReferences"] as ReadonlyArray<OwnerRef> | undefined) ?? []

const addTo = (index: Map<string, Set<string>>, value: string, key: string) => {
  let set = index.get(value)
  if (set === undefined) index.set(value, (set = new Set()))
  set.add(key)
}

const removeFrom = (index: Map<string, Set<string>>, value: string, key: string) => {
  const set = index.get(value)
  if (set === undefined) return
  set.delete(key)
  if (set.size === 0) index.delete(value)
}

const refKey = (ref: Client.ResourceRef) => `${ref.apiVersion}/${ref.kind ?? ref.plural ?? ""}`

/**
 * Start one informer on `client` in the current scope. `selectors` narrow what it holds (a
 * namespace; the node
 * agent watches only the pods bound to it: `fieldSelector: "spec.nodeName=<node>"`).
 */
export const make = (
  client: Client.Client,
  ref: Client.ResourceRef,
  selectors: Pick<Client.ListOptions, "labelSelector" | "fieldSelector" | "namespace"> = {}
): Effect.Effect<Informer, never, Scope.Scope> =>
  Effect.gen(function* () {
    const objects = new Map<string, JsonObject>()
    const byNamespace = new Map<string, Set<string>>()
    const byController = new Map<string, Set<string>>()
    const byOwner = new Map<string, Set<string>>()
    const byNode = new Map<string, Set<string>>()
    const handlers = new Set<(change: Change) => void>()
    const checks = new Set<() => void>()
    const synced = yield* Deferred.make<void>()
    let revision = 0

    const unindex = (key: string, o: JsonObject) => {
      removeFrom(byNamespace, String(metadataOf(o)["namespace"] ?? ""), key)
      const node = nodeNameOf(o)
      if (node !== undefined) removeFrom(byNode, node, key)
      for (const r of owners(o)) {
        if (r.uid === undefined) continue
        removeFrom(byOwner, r.uid, key)
        if (r.controller === true) removeFrom(byController, r.uid, key)
      }
    }
    const index = (key: string, o: JsonObject) => {
      addTo(byNamespace, String(metadataOf(o)["namespace"] ?? ""), key)
      const node = nodeNameOf(o)
      if (node !== undefined) addTo(byNode, node, key)
      for (const r of owners(o)) {
        if (r.uid === undefined) continue
        addTo(byOwner, r.uid, key)
        if (r.controller === true) addTo(byController, r.uid, key)
      }
    }
    const pick = (keys: Set<string> | undefined) => (keys === undefined ? [] : [...keys].map((k) => objects.get(k)!))

    const apply = (type: Change["type"], object: JsonObject) => {
      const key = keyOf(object)
      const old = objects.get(key)
      if (old !== undefined) unindex(key, old)
      if (type === "DELETED") objects.delete(key)
      else {
        objects.set(key, object)
        index(key, object)
      }
      const rv = Number(metadataOf(object)["resourceVersion"] ?? 0)
      if (rv > revision) revision = rv
      const change: Change = { type: type === "ADDED" && old !== undefined ? "MODIFIED" : type, object, old }
      for (const h of handlers) h(change)
      for (const c of checks) c()
    }

    const fiber = yield* client
      .watch(ref, {
        ...selectors,
        onSynced: (rv) => {
          const n = Number(rv)
          if (n > revision) revision = n
          Deferred.unsafeDone(synced, Effect.void)
          for (const c of checks) c()
        }
      })
      .pipe(
        // A chunk at a time: one effect per event would cost more than applying it.
        Stream.runForEachChunk((events) =>
          Effect.sync(() => {
            for (const e of events) apply(e.type, e.object)
          })
        ),
        // The client's watch recovers from everything but a hard failure; keep trying, gently.
        Effect.catchAllCause(() => Effect.sleep(500)),
        Effect.forever,
        Effect.forkScoped
      )
    yield* Effect.addFinalizer(() => Fiber.interrupt(fiber))

    const waitUntil = (predicate: () => boolean, timeoutMs: number): Effect.Effect<boolean> =>
      Effect.suspend(() => {
        if (predicate()) return Effect.succeed(true)
        return Effect.async<boolean>((resume) => {
          // The timeout below runs this in a fiber of its own, which may start after events that
          // made the predicate true were applied: look again before waiting for the next one.
          if (predicate()) return resume(Effect.succeed(true))
          const check = () => {
            if (!predicate()) return
            checks.delete(check)
            resume(Effect.succeed(true))
          }
          checks.add(check)
          return Effect.sync(() => void checks.delete(check))
        }).pipe(Effect.timeoutTo({ duration: timeoutMs, onTimeout: () => false, onSuccess: (x) => x }))
      })

    return {
      ref,
      get: (namespace, name) => objects.get(namespace ? `${namespace}/${name}` : name),
      list: (namespace) => (namespace === undefined ? [...objects.values()] : pick(byNamespace.get(namespace))),
      controlledBy: (uid) => pick(byController.get(uid)),
      ownedBy: (uid) => pick(byOwner.get(uid)),
      onNode: (nodeName) => pick(byNode.get(nodeName)),
      subscribe: (handler) => {
        handlers.add(handler)
        for (const o of objects.values()) handler({ type: "ADDED", object: o, old: undefined })
        return () => void handlers.delete(handler)
      },
      synced: Deferred.await(synced),
      revision: () => revision,
      waitUntil
    }
  })

/** A factory of shared informers living in the current scope. */
export const makeShared = (client: Client.Client): Effect.Effect<Informers, never, Scope.Scope> =>
  Effect.gen(function* () {
    const scope = yield* Effect.scope
    // An informer started later, from a plain call, still runs on its creator's fiber scheduler.
    const scheduler = yield* FiberRef.get(FiberRef.currentScheduler)
    const started = new Map<string, Informer>()
    return {
      for: (ref) => {
        const key = refKey(ref)
        let informer = started.get(key)
        if (informer === undefined) {
          informer = Effect.runSync(Effect.withScheduler(Scope.extend(make(client, ref), scope), scheduler))
          started.set(key, informer)
        }
        return informer
      },
      all: () => [...started.values()]
    }
  })
