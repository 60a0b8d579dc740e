/**
 * Node credentials and the join flow. An administrator (or `koder-fleet server` at start) mints a
 * one-time join token `<id>.<secret>`; an agent presents it as its bearer token (it authenticates
 * as `system:bootstrap:<id>`, group `system:bootstrappers`) and creates a NodeJoin naming its
 * node. That consumes the join token in the same store transaction that records the node's
 * credential, so a join token works exactly once. The node then authenticates with its own
 * long-lived token as `system:node:<name>` (groups `system:nodes`, `system:authenticated`).
 * Only SHA-256 hashes of tokens are stored, and they are compared in constant time; deleting a
 * `nodecredentials` (or `jointokens`) object revokes it.
 *
 * A join never takes a name already in use (a join token would otherwise buy any node's
 * identity, its pods' Secrets included): a name with a live credential, or of an existing Node,
 * is refused with 409 until an administrator revokes that node's credential. Revoking leaves a
 * marker (`noderevocations`), so a revoked node's existing Node object may be rejoined; the join
 * consumes the marker.
 *
 *   POST jointokens ─▶ "<id>.<secret>" ─▶ agent: POST nodejoins {nodeName} (Bearer join token)
 *     ─▶ txn [delete join token, put node credential] ─▶ "fleet-node_<name>_<secret>"
 *
 * Virtual resources of `fleet.koder.dev/v1` (cluster-scoped): `nodejoins` (create),
 * `jointokens` (create, list, get, delete), `nodecredentials` (list, get, delete).
 */
import { Clock, Effect, Either, Option, Schema } from "effect"
import * as FieldError from "../../model/FieldError.js"
import * as Status from "../../model/Status.js"
import * as Validation from "../../model/Validation.js"
import { asObject } from "../../object/Json.js"
import * as Keys from "../../store/Keys.js"
import type { KeyValue, StoreService, TxnOp } from "../../store/Store.js"
import type { StoreError } from "../../store/StoreError.js"
import * as ApiError from "../ApiError.js"
import { bearer, constantTimeEqual, hashToken, type Authenticator } from "../Authn.js"
import * as Body from "../Body.js"
import { json, type ApiRequest, type ApiResponse, type UserInfo } from "../Http.js"
import * as Objects from "../Objects.js"
import type { JsonObject, Resource } from "../Registry.js"
import type { ResourceRoute } from "../Router.js"
import * as Strategies from "../Strategies.js"

/** The API group of the join flow's resources. */
export const group = "fleet.koder.dev"
const apiVersion = `${group}/v1`

/** The group every join-token holder is in. */
export const bootstrappersGroup = "system:bootstrappers"

/** The group every node is in. */
export const nodesGroup = "system:nodes"

/** How long a join token is valid unless told otherwise (24 h). */
export const defaultJoinTokenTtlSeconds = 24 * 3600

const joinKey = (id: string) => Keys.object({ group, resource: "jointokens", name: id })
const credentialKey = (node: string) => Keys.object({ group, resource: "nodecredentials", name: node })
// Not served: written when a credential is revoked, so its node's name may be joined again.
const revocationKey = (node: string) => Keys.object({ group, resource: "noderevocations", name: node })
const nodeKey = (node: string) => Keys.object({ group: "", resource: "nodes", name: node })

const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
const randomString = (length: number): string => {
  // 252 is the largest multiple of 36 below 256: rejecting above it keeps the choice uniform.
  let s = ""
  while (s.length < length) {
    for (const b of crypto.getRandomValues(new Uint8Array(length * 2))) if (b < 252 && s.length < length) s += alphabet[b % 36]!
  }
  return s
}

const joinPattern = /^([a-z0-9]{6})\.([a-z0-9]{32})$/
const nodePattern = /^fleet-node_([a-z0-9.-]{1,253})_([a-z0-9]{40})$/

/** A join token as stored (only the hash of its secret). */
const JoinRecord = Schema.Struct({
  apiVersion: Schema.String,
  kind: Schema.Literal("JoinToken"),
  metadata: Schema.Struct({ name: Schema.String, uid: Schema.String, creationTimestamp: Schema.String }),
  spec: Schema.Struct({ tokenHash: Schema.String, expirationTimestamp: Schema.String })
})
type JoinRecord = typeof JoinRecord.Type

/** A node credential as stored (only the hash of its token). */
const CredentialRecord = Schema.Struct({
  apiVersion: Schema.String,
  kind: Schema.Literal("NodeCredential"),
  metadata: Schema.Struct({ name: Schema.String, uid: Schema.String, creationTimestamp: Schema.String }),
  spec: Schema.Struct({ nodeName: Schema.String, tokenHash: Schema.String })
})
type CredentialRecord = typeof CredentialRecord.Type

const decodeJoin = Schema.decodeUnknownOption(Schema.parseJson(JoinRecord))
const decodeCredential = Schema.decodeUnknownOption(Schema.parseJson(CredentialRecord))

/** The user of a join-token holder. */
export const bootstrapUser = (id: string): UserInfo => ({ name: `system:bootstrap:${id}`, uid: `bootstrap:${id}`, groups: [bootstrappersGroup, "system:authenticated"] })

/** The user of a node. */
export const nodeUser = (node: string, uid: string): UserInfo => ({ name: `system:node:${node}`, uid, groups: [nodesGroup, "system:authenticated"] })

const nodeUserPrefix = "system:node:"

/** The node a user acts as (kube's NodeIdentity: `system:node:<name>` in group `system:nodes`), if any. */
export const nodeNameOf = (user: UserInfo): string | undefined =>
  user.groups.includes(nodesGroup) && user.name.startsWith(nodeUserPrefix) && user.name.length > nodeUserPrefix.length ? user.name.slice(nodeUserPrefix.length) : undefined

/** A minted join token: give `token` to the agent; it is stored only as a hash. */
export interface JoinToken {
  readonly id: string
  readonly token: string
  readonly expiresAt: string
}

/** Mint a join token valid for `ttlSeconds`. */
export const createJoinToken = (store: StoreService, ttlSeconds = defaultJoinTokenTtlSeconds): Effect.Effect<JoinToken, StoreError> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    for (;;) {
      const id = randomString(6)
      const token = `${id}.${randomString(32)}`
      const expiresAt = Objects.timestamp(now + ttlSeconds * 1000)
      const record: JoinRecord = {
        apiVersion,
        kind: "JoinToken",
        metadata: { name: id, uid: crypto.randomUUID(), creationTimestamp: Objects.timestamp(now) },
        spec: { tokenHash: yield* hashToken(token), expirationTimestamp: expiresAt }
      }
      const created = yield* Effect.either(store.create(joinKey(id), JSON.stringify(record)))
      if (Either.isRight(created)) return { id, token, expiresAt }
      if (created.left._tag !== "AlreadyExists") return yield* Effect.fail(created.left)
    }
  })

/** The live join token a bearer token names, with its store entry (for consuming it). */
const findJoin = (store: StoreService, token: string) =>
  Effect.gen(function* () {
    const m = joinPattern.exec(token)
    if (m === null) return Option.none<{ id: string; kv: KeyValue }>()
    const kv = yield* Effect.option(store.get(joinKey(m[1]!)))
    if (Option.isNone(kv)) return Option.none()
    const record = decodeJoin(kv.value.value)
    if (Option.isNone(record)) return Option.none()
    const presented = yield* hashToken(token)
    const now = yield* Clock.currentTimeMillis
    if (!constantTimeEqual(presented, record.value.spec.tokenHash) || Date.parse(record.value.spec.expirationTimestamp) <= now) return Option.none()
    return Option.some({ id: m[1]!, kv: kv.value })
  })

/** Accepts an unused, unexpired join token as `system:bootstrap:<id>`. */
export const joinTokenAuthenticator = (store: StoreService): Authenticator => (headers) =>
  Effect.gen(function* () {
    const token = bearer(headers)
    if (token === undefined) return Option.none()
    const found = yield* findJoin(store, token)
    return Option.map(found, (f) => bootstrapUser(f.id))
  })

/** Accepts a node's token as `system:node:<name>` while its credential exists. */
export const nodeAuthenticator = (store: StoreService): Authenticator => (headers) =>
  Effect.gen(function* () {
    const token = bearer(headers)
    const m = token === undefined ? null : nodePattern.exec(token)
    if (m === null || token === undefined) return Option.none()
    const kv = yield* Effect.option(store.get(credentialKey(m[1]!)))
    const record = Option.flatMap(kv, (kv) => decodeCredential(kv.value))
    if (Option.isNone(record)) return Option.none()
    const presented = yield* hashToken(token)
    if (!constantTimeEqual(presented, record.value.spec.tokenHash)) return Option.none()
    return Option.some(nodeUser(record.value.spec.nodeName, record.value.metadata.uid))
  })

const forbidden = (resource: string, detail: string) => ApiError.of(Status.forbidden({ group, resource }, "", detail))
const unauthorized = () => ApiError.of(Status.unauthorized())
const notAllowed = (resource: string, method: string) => ApiError.of(Status.methodNotSupported({ group, resource }, method.toLowerCase()))

const bodyOf = (request: ApiRequest, kind: string): Effect.Effect<JsonObject, ApiError.ApiError> =>
  Effect.gen(function* () {
    const parsed = Either.flatMap(Body.parse(request.body, request.headers["content-type"]), Body.asObject)
    if (Either.isLeft(parsed)) return yield* Effect.fail(parsed.left)
    const o = parsed.right
    if ((o["kind"] !== undefined && o["kind"] !== kind) || (o["apiVersion"] !== undefined && o["apiVersion"] !== apiVersion)) {
      return yield* Effect.fail(ApiError.badRequest(`the body must be a ${apiVersion} ${kind}`))
    }
    return o
  })

const storeFailure = (resource: string, name: string) => (e: StoreError) => ApiError.fromStore(e, { resource: { group, resource }, name })

/** POST nodejoins: exchange the caller's join token and a node name for the node's token. */
const join = (store: StoreService, request: ApiRequest): Effect.Effect<ApiResponse, ApiError.ApiError> =>
  Effect.gen(function* () {
    const token = bearer(request.headers)
    if (token === undefined || !joinPattern.test(token)) return yield* Effect.fail(forbidden("nodejoins", "a NodeJoin is created with a join token as the bearer token"))
    const body = yield* bodyOf(request, "NodeJoin")
    const spec = asObject(body["spec"])
    const nodeName = spec["nodeName"]
    const problems = typeof nodeName !== "string" || nodeName === "" ? ["Required value"] : Validation.isDNS1123Subdomain(nodeName)
    if (typeof nodeName !== "string" || problems.length > 0) {
      return yield* Effect.fail(ApiError.of(Status.invalid({ group, kind: "NodeJoin" }, "", problems.map((p) => FieldError.invalid("spec.nodeName", nodeName, p)))))
    }
    const found = yield* findJoin(store, token)
    if (Option.isNone(found)) return yield* Effect.fail(unauthorized())
    const now = yield* Clock.currentTimeMillis
    const nodeToken = `fleet-node_${nodeName}_${randomString(40)}`
    const uid = crypto.randomUUID()
    const record: CredentialRecord = {
      apiVersion,
      kind: "NodeCredential",
      metadata: { name: nodeName, uid, creationTimestamp: Objects.timestamp(now) },
      spec: { nodeName, tokenHash: yield* hashToken(nodeToken) }
    }
    const taken = (detail: string) => Effect.fail(ApiError.of(Status.conflict({ group, resource: "nodejoins" }, nodeName, detail)))
    const revoke = `revoke it first (kubectl delete nodecredential ${nodeName}), then join again`
    const existing = yield* Effect.option(store.get(credentialKey(nodeName)))
    if (Option.isSome(existing)) return yield* taken(`node "${nodeName}" already has a live node credential; ${revoke}`)
    const revoked = yield* Effect.option(store.get(revocationKey(nodeName)))
    const node = yield* Effect.option(store.get(nodeKey(nodeName)))
    if (Option.isSome(node) && Option.isNone(revoked)) {
      return yield* taken(`node "${nodeName}" already exists; a join may take its name only after its node credential is revoked (kubectl delete nodecredential ${nodeName}), or, for a node that never joined, after the Node is deleted`)
    }
    const ops: Array<TxnOp> = [
      { op: "delete", key: found.value.kv.key, expectedRevision: found.value.kv.modRevision },
      // `create`: a concurrent join for the same name loses here.
      { op: "create", key: credentialKey(nodeName), value: JSON.stringify(record) },
      ...(Option.isSome(revoked) ? [{ op: "delete" as const, key: revoked.value.key, expectedRevision: revoked.value.modRevision }] : [])
    ]
    const committed = yield* Effect.either(store.txn(ops))
    if (Either.isLeft(committed)) {
      const e = committed.left
      // Someone else used the join token first: it is spent.
      if (e._tag !== "Unavailable" && e.key === found.value.kv.key) return yield* Effect.fail(unauthorized())
      if (e._tag !== "Unavailable" && e.key !== found.value.kv.key) return yield* taken(`another join took node "${nodeName}" first; ${revoke}`)
      return yield* Effect.fail(storeFailure("nodejoins", nodeName)(e))
    }
    const user = nodeUser(nodeName, uid)
    return json(201, {
      apiVersion,
      kind: "NodeJoin",
      metadata: { name: nodeName, creationTimestamp: Objects.timestamp(now) },
      spec: { nodeName },
      status: { token: nodeToken, username: user.name, groups: user.groups }
    })
  })

/** A stored record as the API shows it: without the token hash. */
const shown = (kv: KeyValue): JsonObject => {
  const o = Objects.fromStored(kv)
  const { tokenHash: _hash, ...spec } = asObject(o["spec"])
  return { ...o, spec }
}

/** Delete a node credential and, in the same transaction, mark its name as revoked (joinable again). */
const revokeCredential = (store: StoreService, name: string): Effect.Effect<KeyValue, ApiError.ApiError> =>
  Effect.gen(function* () {
    const fail = storeFailure("nodecredentials", name)
    const kv = yield* store.get(credentialKey(name)).pipe(Effect.mapError(fail))
    const now = yield* Clock.currentTimeMillis
    const marker = JSON.stringify({ apiVersion, kind: "NodeRevocation", metadata: { name, creationTimestamp: Objects.timestamp(now) } })
    const previous = yield* Effect.option(store.get(revocationKey(name)))
    const mark: TxnOp = Option.isSome(previous)
      ? { op: "update", key: revocationKey(name), value: marker, expectedRevision: previous.value.modRevision }
      : { op: "create", key: revocationKey(name), value: marker }
    yield* store.txn([{ op: "delete", key: kv.key, expectedRevision: kv.modRevision }, mark]).pipe(Effect.mapError(fail))
    return kv
  })

/** list, get and delete of stored records under `resource`. */
const records = (store: StoreService, resource: string, kind: string, request: ApiRequest, route: ResourceRoute): Effect.Effect<ApiResponse, ApiError.ApiError> =>
  Effect.gen(function* () {
    const method = request.method.toUpperCase()
    const key = (name: string) => Keys.object({ group, resource, name })
    if (route.name === undefined) {
      if (method !== "GET") return yield* Effect.fail(notAllowed(resource, method))
      const page = yield* store.list(Keys.prefix(group, resource)).pipe(Effect.mapError(storeFailure(resource, "")))
      return json(200, { apiVersion, kind: `${kind}List`, metadata: { resourceVersion: String(page.revision) }, items: page.items.map(shown) })
    }
    if (method === "GET") return json(200, shown(yield* store.get(key(route.name)).pipe(Effect.mapError(storeFailure(resource, route.name)))))
    if (method === "DELETE") {
      if (resource === "nodecredentials") return json(200, shown(yield* revokeCredential(store, route.name)))
      const deleted = yield* store.delete(key(route.name)).pipe(Effect.mapError(storeFailure(resource, route.name)))
      return json(200, shown(deleted.prev))
    }
    return yield* Effect.fail(notAllowed(resource, method))
  })

/** A cluster-scoped virtual resource of `fleet.koder.dev/v1`. */
const virtual = (kind: string, plural: string, handle: (request: ApiRequest, route: ResourceRoute) => Effect.Effect<ApiResponse, ApiError.ApiError>): Resource => ({
  group,
  version: "v1",
  apiVersion,
  kind,
  listKind: `${kind}List`,
  plural,
  singular: kind.toLowerCase(),
  namespaced: false,
  shortNames: [],
  categories: [],
  subresources: { status: false, scale: undefined },
  decode: (input) => Either.right(input as JsonObject), // never reached: the resource's own handler reads its bodies
  strategy: Strategies.neutral,
  openapi: { _tag: "JsonSchema", schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
  printerColumns: [],
  crd: undefined,
  handle: (request, route) => (route.subresource !== undefined ? Effect.fail(notAllowed(plural, request.method)) : handle(request, route))
})

/** The join flow's virtual resources, for the registry. */
export const resources = (store: StoreService, options: { readonly joinTokenTtlSeconds?: number } = {}): ReadonlyArray<Resource> => [
  virtual("NodeJoin", "nodejoins", (request, route) =>
    request.method.toUpperCase() === "POST" && route.name === undefined ? join(store, request) : Effect.fail(notAllowed("nodejoins", request.method))
  ),
  virtual("JoinToken", "jointokens", (request, route) =>
    request.method.toUpperCase() === "POST" && route.name === undefined
      ? Effect.gen(function* () {
          const body = yield* bodyOf(request, "JoinToken")
          const spec = asObject(body["spec"])
          const ttl = spec["ttlSeconds"] ?? options.joinTokenTtlSeconds ?? defaultJoinTokenTtlSeconds
          if (typeof ttl !== "number" || !Number.isInteger(ttl) || ttl <= 0) {
            return yield* Effect.fail(ApiError.of(Status.invalid({ group, kind: "JoinToken" }, "", [FieldError.invalid("spec.ttlSeconds", ttl, "must be a positive integer")])))
          }
          const minted = yield* createJoinToken(store, ttl).pipe(Effect.mapError(storeFailure("jointokens", "")))
          const kv = yield* store.get(joinKey(minted.id)).pipe(Effect.mapError(storeFailure("jointokens", minted.id)))
          return json(201, { ...shown(kv), status: { token: minted.token } })
        })
      : records(store, "jointokens", "JoinToken", request, route)
  ),
  virtual("NodeCredential", "nodecredentials", (request, route) => records(store, "nodecredentials", "NodeCredential", request, route))
]
