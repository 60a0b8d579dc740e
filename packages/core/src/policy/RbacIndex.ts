/**
 * The RBAC index: every Role, ClusterRole, RoleBinding and ClusterRoleBinding in memory, fed by
 * ONE store watch on the RBAC prefix, and the `Policy` derived from them (rebuilt lazily after a
 * change), so an authorization decision is a few map lookups and never reads the store. It also
 * plays Kubernetes' clusterrole-aggregation controller: the computed rules of aggregated
 * ClusterRoles are written back to their objects, so users read what is enforced.
 *
 *   store.list ─▶ objects ─┐
 *   store.watch(prefix) ───┴▶ objects (key → parsed) ─dirty─▶ Rbac.make ─▶ policy() ─▶ authorize
 *        ▲ Compacted: re-list                                   └▶ aggregated rules ≠ stored ─▶ store.update
 */
import { Chunk, Duration, Effect, type Scope, Stream } from "effect"
import type * as Authz from "../api/Authz.js"
import * as Transformer from "../api/Transformer.js"
import * as Rbac from "../model/Rbac.js"
import { asObject, type JsonObject } from "../object/Json.js"
import type { StoreService } from "../store/Store.js"
import * as Policy from "./RbacRules.js"

/** Where RBAC objects live in the store. */
export const prefix = `/registry/${Rbac.Group}/`

/** How to build an index. */
export interface Options {
  /** Write the computed rules of aggregated ClusterRoles back to the store (default true). */
  readonly reconcileAggregation?: boolean
  /** Encoding of stored values (encryption at rest); default: as they are. */
  readonly transformer?: Transformer.Transformer
}

/** A running index. */
export interface RbacIndex {
  /** The current policy (consistent at `revision()`). */
  readonly policy: () => Policy.Policy
  /** The newest store revision applied. */
  readonly revision: () => number
  /** The RBAC authorizer over the current policy. */
  readonly authorize: Authz.Authorizer
}

interface Entry {
  readonly role: Policy.RoleObject | undefined
  readonly binding: Policy.BindingObject | undefined
  readonly raw: Record<string, unknown>
  readonly modRevision: number
}

const backoff = (attempt: number) => Duration.millis(Math.min(5_000, 50 * 2 ** Math.min(attempt, 10)))

const resourceOf = (key: string) => ({ group: Rbac.Group, plural: key.slice(prefix.length).split("/")[0] ?? "" })

/** Start an index: list the RBAC prefix, then follow it until the scope closes. Never fails. */
export const make = (store: StoreService, options: Options = {}): Effect.Effect<RbacIndex, never, Scope.Scope> =>
  Effect.gen(function* () {
    const transformer = options.transformer ?? Transformer.identity
    const objects = new Map<string, Entry>()
    let applied = 0
    let current: Policy.Policy = Policy.empty
    let dirty = true

    const parse = (key: string, value: string, modRevision: number): Entry | undefined => {
      try {
        // RBAC objects in the store passed their schema when written: JSON objects.
        const raw: JsonObject = JSON.parse(transformer.fromStore(resourceOf(key), value))
        return { role: Policy.roleFromJson(raw), binding: Policy.bindingFromJson(raw), raw, modRevision }
      } catch {
        return undefined
      }
    }
    const put = (key: string, value: string, modRevision: number) => {
      const e = parse(key, value, modRevision)
      if (e === undefined) objects.delete(key)
      else objects.set(key, e)
    }

    const policy = (): Policy.Policy => {
      if (dirty) {
        const roles: Array<Policy.RoleObject> = []
        const bindings: Array<Policy.BindingObject> = []
        for (const e of objects.values()) {
          if (e.role) roles.push(e.role)
          if (e.binding) bindings.push(e.binding)
        }
        current = Policy.make(roles, bindings)
        dirty = false
      }
      return current
    }

    const listAll = Effect.gen(function* () {
      const first = yield* store.list(prefix, { limit: 1000 })
      const items = [...first.items]
      let token = first.continue
      while (token !== undefined) {
        const next = yield* store.list(prefix, { limit: 1000, continue: token })
        items.push(...next.items)
        token = next.continue
      }
      objects.clear()
      for (const kv of items) put(kv.key, kv.value, kv.modRevision)
      applied = first.revision
      dirty = true
    })
    const relist = (attempt: number): Effect.Effect<void> =>
      listAll.pipe(Effect.catchAll(() => Effect.zipRight(Effect.sleep(backoff(attempt)), relist(attempt + 1))))

    // Kubernetes' clusterrole-aggregation controller: stored rules follow the computed ones.
    const reconcile = Effect.suspend(() => {
      if (options.reconcileAggregation === false) return Effect.void
      const p = policy()
      const stale: Array<[string, Entry, ReadonlyArray<Policy.Rule>]> = []
      for (const [key, e] of objects) {
        if (e.role?.kind !== "ClusterRole" || e.role.aggregationRule === undefined) continue
        const rules = p.aggregated.get(e.role.name) ?? []
        if (!Policy.rulesEqual(rules, e.role.rules)) stale.push([key, e, rules])
      }
      return Effect.forEach(
        stale,
        ([key, e, rules]) => {
          const { resourceVersion: _rv, ...metadata } = asObject(e.raw["metadata"])
          const text = transformer.toStore(resourceOf(key), JSON.stringify({ ...e.raw, metadata, rules: rules.map(plainRule) }))
          // A lost compare-and-swap means a newer version is on its way through the watch.
          return Effect.ignore(store.update(key, text, e.modRevision))
        },
        { discard: true }
      )
    })

    const follow = (attempt: number): Effect.Effect<void> =>
      Effect.suspend(() => {
        let progressed = false
        return store.watch(prefix, applied).pipe(
          Stream.runForEachChunk((chunk) =>
            Effect.suspend(() => {
              progressed = true
              for (const ev of Chunk.toReadonlyArray(chunk)) {
                if (ev.type === "DELETED") objects.delete(ev.key)
                else put(ev.key, ev.value, ev.revision)
                applied = ev.revision
              }
              dirty = true
              return reconcile
            })
          ),
          Effect.matchEffect({
            onSuccess: () => Effect.zipRight(Effect.sleep(backoff(progressed ? 0 : attempt)), follow(progressed ? 0 : attempt + 1)),
            onFailure: (error) =>
              error._tag === "Compacted"
                ? Effect.zipRight(Effect.zipRight(relist(0), reconcile), follow(0))
                : Effect.zipRight(Effect.sleep(backoff(progressed ? 0 : attempt + 1)), follow(progressed ? 0 : attempt + 1))
          })
        )
      })

    // The first list is awaited (briefly retried) so a starting server does not deny everyone.
    const loaded = yield* listAll.pipe(Effect.retry({ times: 3 }), Effect.isSuccess)
    yield* Effect.forkScoped(Effect.zipRight(loaded ? reconcile : relist(0), follow(0)))

    return {
      policy,
      revision: () => applied,
      authorize: (attributes) => Effect.sync(() => Policy.authorize(policy(), attributes))
    }
  })

// Rules as Kubernetes serialises them: absent lists omitted.
const plainRule = (r: Policy.Rule): Record<string, unknown> => {
  const out: Record<string, unknown> = { verbs: r.verbs }
  if (r.apiGroups !== undefined) out["apiGroups"] = r.apiGroups
  if (r.resources !== undefined) out["resources"] = r.resources
  if (r.resourceNames !== undefined) out["resourceNames"] = r.resourceNames
  if (r.nonResourceURLs !== undefined) out["nonResourceURLs"] = r.nonResourceURLs
  return out
}
