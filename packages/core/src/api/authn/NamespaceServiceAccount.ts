/**
 * Every namespace has a `default` ServiceAccount, as in Kubernetes. An admission plugin adds the
 * account to the namespace's own create transaction (so it exists the moment the namespace
 * does), and `ensure` runs at server start: it creates the system namespaces when missing and
 * backfills the account of any namespace created before this plugin. Among them is
 * `kube-node-lease`, where agents renew their heartbeat Leases: without it no Lease can be
 * written and every node looks lost 40 s after its last status report.
 * Both build the stored JSON with the API's own create path, so it is what a POST would store.
 */
import { Clock, Effect, Either, Option } from "effect"
import * as Kinds from "../../model/Kinds.js"
import * as Meta from "../../model/Meta.js"
import * as Keys from "../../store/Keys.js"
import type { StoreService, TxnOp } from "../../store/Store.js"
import type { StoreError } from "../../store/StoreError.js"
import type * as Admission from "../Admission.js"
import type { ApiError } from "../ApiError.js"
import * as Objects from "../Objects.js"
import * as Registry from "../Registry.js"

/** The name of the account every namespace gets. */
export const defaultName = "default"

/** The namespaces a cluster always has. */
export const systemNamespaces: ReadonlyArray<string> = ["default", "kube-system", "kube-public", "kube-node-lease"]

const resourceOf = (kind: string): Registry.Resource => Registry.builtIn(Option.getOrThrow(Kinds.kindFor("v1", kind)))
const serviceAccounts = resourceOf("ServiceAccount")
const namespaces = resourceOf("Namespace")

const saKey = (namespace: string) => Keys.object({ group: "", resource: "serviceaccounts", namespace, name: defaultName })
const nsKey = (name: string) => Keys.object({ group: "", resource: "namespaces", name })

const stored = (resource: Registry.Resource, body: Registry.JsonObject, namespace: string | undefined, region: string, now: number): Either.Either<string, ApiError> =>
  Either.flatMap(Objects.prepareCreate(resource, body, { namespace, now, uid: crypto.randomUUID(), region, random: Math.random }), Objects.toStored)

/** The stored form of `namespace`'s default ServiceAccount, labelled with `region`. */
export const serviceAccountValue = (namespace: string, region: string, now: number): Either.Either<string, ApiError> =>
  stored(serviceAccounts, { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: defaultName, namespace } }, namespace, region, now)

/** The operation creating `namespace`'s default ServiceAccount, unless it already exists. */
const createOp = (store: StoreService, namespace: string, region: string) =>
  Effect.gen(function* () {
    const existing = yield* Effect.either(store.get(saKey(namespace)))
    if (Either.isRight(existing)) return [] as ReadonlyArray<TxnOp>
    const now = yield* Clock.currentTimeMillis
    const value = yield* serviceAccountValue(namespace, region, now)
    return [{ op: "create", key: saKey(namespace), value }] as ReadonlyArray<TxnOp>
  })

/** Admission: a namespace create also creates its `default` ServiceAccount, in the same transaction. */
export const plugin = (store: StoreService): Admission.Plugin => ({
  name: "NamespaceServiceAccount",
  validate: (request) => {
    if (request.operation !== "CREATE" || request.resource.group !== "" || request.resource.plural !== "namespaces" || request.subresource !== "") {
      return Effect.succeed([])
    }
    const region = Meta.regionOf(Objects.meta(request.object) as Meta.ObjectMeta) ?? "local" // decoded metadata; only its labels are read
    return createOp(store, request.name, region)
  }
})

const ignoreExisting = (e: StoreError) => (e._tag === "AlreadyExists" ? Effect.void : Effect.fail(e))

/**
 * Make sure the system namespaces exist and every live namespace has its default account.
 * Idempotent; safe to run at every start and from several servers at once.
 */
export const ensure = (store: StoreService, region: string): Effect.Effect<void, StoreError> =>
  Effect.gen(function* () {
    for (const name of systemNamespaces) {
      const exists = yield* Effect.either(store.get(nsKey(name)))
      if (Either.isRight(exists)) continue
      const now = yield* Clock.currentTimeMillis
      const ns = yield* Effect.orDie(stored(namespaces, { apiVersion: "v1", kind: "Namespace", metadata: { name } }, undefined, region, now))
      const sa = yield* Effect.orDie(createOp(store, name, region))
      yield* store.txn([{ op: "create", key: nsKey(name), value: ns }, ...sa]).pipe(Effect.catchAll(ignoreExisting))
    }
    const all = yield* store.list(Keys.prefix("", "namespaces"))
    for (const kv of all.items) {
      const ns = Objects.fromStored(kv)
      const m = Objects.meta(ns)
      if (m["deletionTimestamp"] !== undefined || typeof m["name"] !== "string") continue
      const ops = yield* Effect.orDie(createOp(store, m["name"], Meta.regionOf(m as Meta.ObjectMeta) ?? region)) // as above
      if (ops.length > 0) yield* store.txn(ops).pipe(Effect.catchAll(ignoreExisting))
    }
  }).pipe(Effect.asVoid)
