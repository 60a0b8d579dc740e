/**
 * A property-based fuzz test of the API (issue 29), with fast-check: random sequences of creates,
 * updates, status updates, JSON / merge / strategic patches, scales, lists and deletes of
 * ConfigMaps, Secrets, Pods and Deployments, their values hostile (numbers past int32 and 2^53,
 * wrong types, deep and odd JSON, directives), sent to the real API server on a real SQLite store. After every request:
 * no 5xx and no defect, every error a Status with its own code, and every successful write's
 * resourceVersion either the object's unchanged one (a no-op) or newer than every one before.
 * After every sequence: every object in the store decodes with its kind's schema and reads back
 * through the API exactly as the API last returned it. (The one 5xx allowed is Kubernetes' own
 * 504 for a list at a resourceVersion the store has not reached.)
 *
 * Deterministic (FLEET_FUZZ_RUNS sets the number of sequences, 100 by default): the seed is printed and can be replayed with FLEET_FUZZ_SEED=<seed>.
 */
import { ApiServer, Authn, Keys, type Registry } from "@koder/fleet-core"
import { SqliteStore } from "@koder/fleet-store-sqlite"
import { Effect, Either, Exit, Scope } from "effect"
import fc from "fast-check"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, expect, it } from "vitest"

const seed = Number(process.env["FLEET_FUZZ_SEED"] ?? 29)
const numRuns = Number(process.env["FLEET_FUZZ_RUNS"] ?? 100)

type Json = any
type Response = { status: number; body: Json }

let dir: string
let scope: Scope.CloseableScope
let server: ApiServer.ApiServer
let store: SqliteStore.SqliteStoreService

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "fleet-fuzz-"))
  scope = await Effect.runPromise(Scope.make())
  store = await Effect.runPromise(Scope.extend(SqliteStore.make({ filename: join(dir, "state.db"), synchronous: "OFF" }), scope))
  server = await Effect.runPromise(
    Scope.extend(ApiServer.make({ store, authenticate: () => Effect.succeed(Authn.bootstrapAdmin), region: "fuzz", waitForRevision: "100 millis" }), scope)
  )
}, 60_000)

afterAll(async () => {
  if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void))
  if (dir !== undefined) await rm(dir, { recursive: true, force: true })
})

/** One request through the server's handler; a defect (an exception) fails the test. */
const call = async (method: string, path: string, body?: string, contentType = "application/json"): Promise<Response> => {
  const [p, q] = path.split("?")
  const response = await Effect.runPromise(
    server.handle({
      method,
      path: p!,
      query: new URLSearchParams(q ?? ""),
      headers: { "content-type": contentType },
      body: body === undefined ? undefined : new TextEncoder().encode(body),
      client: "fuzz"
    })
  )
  if (response._tag === "Stream") throw new Error(`${method} ${path} answered a stream`)
  return { status: response.status, body: response.body }
}

// ---- The kinds and what the fuzzer sends ---------------------------------------------------

interface Kind {
  readonly kind: string
  readonly base: string
  readonly plural: string
  readonly group: string
  readonly valid: (name: string) => Json
  /** JSON Pointers worth aiming at in this kind. */
  readonly pointers: ReadonlyArray<string>
}

const container = { name: "c", image: "nginx:1.27", ports: [{ containerPort: 80 }], env: [{ name: "A", value: "1" }] }
// Printed by its name in a counterexample, not as the whole table entry.
const named = (kind: Kind): Kind => Object.assign(kind, { [fc.toStringMethod]: () => kind.kind })
const table: Array<Kind> = [
  {
    kind: "ConfigMap",
    base: "/api/v1",
    plural: "configmaps",
    group: "",
    valid: (name) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, annotations: { a: "x" } }, data: { k: "v" } }),
    pointers: ["/data", "/data/k", "/binaryData", "/binaryData/b", "/immutable"]
  },
  {
    kind: "Secret",
    base: "/api/v1",
    plural: "secrets",
    group: "",
    valid: (name) => ({ apiVersion: "v1", kind: "Secret", metadata: { name }, stringData: { k: "v" } }),
    pointers: ["/data", "/data/k", "/stringData", "/type", "/immutable"]
  },
  {
    kind: "Pod",
    base: "/api/v1",
    plural: "pods",
    group: "",
    valid: (name) => ({ apiVersion: "v1", kind: "Pod", metadata: { name }, spec: { containers: [container] } }),
    pointers: [
      "/spec/containers",
      "/spec/containers/0",
      "/spec/containers/-",
      "/spec/containers/0/image",
      "/spec/containers/0/ports/0/containerPort",
      "/spec/containers/0/env",
      "/spec/terminationGracePeriodSeconds",
      "/spec/activeDeadlineSeconds",
      "/spec/tolerations",
      "/status"
    ]
  },
  {
    kind: "Deployment",
    base: "/apis/apps/v1",
    plural: "deployments",
    group: "apps",
    valid: (name) => ({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name },
      spec: { replicas: 1, selector: { matchLabels: { app: name } }, template: { metadata: { labels: { app: name } }, spec: { containers: [container] } } }
    }),
    pointers: [
      "/spec/replicas",
      "/spec/minReadySeconds",
      "/spec/revisionHistoryLimit",
      "/spec/progressDeadlineSeconds",
      "/spec/selector",
      "/spec/template/spec/containers/0/ports/0/containerPort",
      "/spec/template/spec/terminationGracePeriodSeconds",
      "/spec/strategy"
    ]
  }
]
const kinds: ReadonlyArray<Kind> = table.map(named)

const commonPointers = ["", "/metadata", "/metadata/name", "/metadata/labels", "/metadata/labels/a", "/metadata/annotations", "/metadata/annotations/k", "/metadata/finalizers", "/metadata/resourceVersion", "/apiVersion", "/kind", "/spec"]

// Numbers where int32, int64, JavaScript and SQLite part ways, and the usual hostile values.
const hostileNumber = fc.oneof(
  fc.constantFrom(0, -1, 1.5, 2147483647, 2147483648, -2147483649, 4294967296, 2 ** 53, 2 ** 53 + 2, 2 ** 63, 1e300, -1e300, 5e-324, -0),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true })
)
const hostileString = fc.oneof(
  fc.constantFrom("", "a", "__proto__", "constructor", "$patch", "../../etc/passwd", "\u0000", "é", "🙂", "1e300", "2147483648", "x".repeat(300)),
  fc.string({ maxLength: 20 })
)
const hostileScalar = fc.oneof(hostileNumber, hostileString, fc.boolean(), fc.constant(null))
const hostileValue: fc.Arbitrary<Json> = fc.letrec<{ value: Json }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    hostileScalar,
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(hostileString, tie("value"), { maxKeys: 4 }),
    // What the schemas expect, so the fuzzer gets past decoding to the later stages too.
    fc.constant(container),
    fc.constant([container]),
    fc.constant({ k: "v" }),
    fc.constant({ matchLabels: { app: "x" } })
  )
})).value

const pointerFor = (kind: Kind) => fc.constantFrom(...commonPointers, ...kind.pointers)

const jsonPatchOp = (kind: Kind) =>
  fc.record({
    op: fc.constantFrom("add", "remove", "replace", "move", "copy", "test", "bogus"),
    path: pointerFor(kind),
    from: pointerFor(kind),
    value: hostileValue
  })

/** Sets `value` at a JSON Pointer in a copy of `object`, making the parents it needs. */
const setAt = (object: Json, pointer: string, value: Json): Json => {
  if (pointer === "") return value
  const root = structuredClone(object)
  const tokens = pointer.slice(1).split("/")
  let at = root
  for (const token of tokens.slice(0, -1)) {
    if (typeof at[token] !== "object" || at[token] === null) at[token] = /^\d+$/.test(token) ? [] : {}
    at = at[token]
  }
  at[tokens[tokens.length - 1]!] = value
  return root
}

/** A merge or strategic patch: a few pointers set to hostile values, maybe with directives. */
const partialObject = (kind: Kind, strategic: boolean) =>
  fc
    .tuple(
      fc.array(fc.tuple(pointerFor(kind).filter((p) => p !== ""), hostileValue), { minLength: 1, maxLength: 3 }),
      strategic
        ? fc.option(
            // [the object holding the directive, the directive's key, its value]
            fc.constantFrom<[string, string, Json]>(
              ["", "$patch", "replace"],
              ["", "$patch", "delete"],
              ["/metadata", "$patch", "bogus"],
              ["/spec", "$retainKeys", ["containers"]],
              ["/spec", "$setElementOrder/containers", [{ name: "c" }, { name: "d" }]],
              ["/metadata", "$deleteFromPrimitiveList/finalizers", ["a"]],
              ["/spec", "containers", [{ name: "c", $patch: "delete" }]],
              ["/spec", "containers", [{ name: "d", image: "x" }, { $patch: "replace" }]]
            ),
            { nil: undefined }
          )
        : fc.constant(undefined)
    )
    .map(([sets, directive]) => {
      let patch: Json = {}
      for (const [pointer, value] of sets) patch = setAt(patch, pointer, value)
      if (directive !== undefined) {
        const [holder, key, value] = directive
        const current = holder === "" ? patch : holder.slice(1).split("/").reduce((o: Json, k) => (typeof o?.[k] === "object" && o[k] !== null ? o[k] : undefined), patch)
        patch = setAt(patch, holder, { ...(typeof current === "object" && current !== null && !Array.isArray(current) ? current : {}), [key]: value })
      }
      return patch
    })

type Action =
  | { readonly verb: "create" | "update"; readonly kind: Kind; readonly name: string; readonly body: string }
  | { readonly verb: "patch"; readonly kind: Kind; readonly name: string; readonly contentType: string; readonly body: string }
  | { readonly verb: "scale"; readonly name: string; readonly body: string; readonly patch: boolean }
  | { readonly verb: "status"; readonly kind: Kind; readonly name: string; readonly body: string }
  | { readonly verb: "list"; readonly kind: Kind; readonly query: string }
  | { readonly verb: "delete"; readonly kind: Kind; readonly name: string; readonly body: string | undefined }

const names = fc.constantFrom("a", "b")
const kindArb = fc.constantFrom(...kinds)
const deploymentKind = kinds.find((k) => k.kind === "Deployment")!

// A valid object with a few fields overwritten by hostile values (or left valid, a third of the time).
const objectBody = (kind: Kind, name: string) =>
  fc
    .array(fc.tuple(pointerFor(kind).filter((p) => p !== "" && p !== "/metadata/name" && !p.endsWith("/-")), fc.oneof(hostileValue, fc.nat(100))), { maxLength: 2 })
    .map((sets) => JSON.stringify(sets.reduce((o, [pointer, value]) => setAt(o, pointer, value), kind.valid(name))))

// Status writes skip the main resource's decoding: their own must hold the same line.
const statusPointers = ["/status/phase", "/status/replicas", "/status/readyReplicas", "/status/observedGeneration", "/status/conditions", "/status/containerStatuses", "/status/podIP"]
const statusKinds = kinds.filter((k) => k.kind === "Pod" || k.kind === "Deployment")
const statusBody = (name: string) =>
  fc
    .array(fc.tuple(fc.constantFrom(...statusPointers), fc.oneof(hostileValue, fc.nat(5))), { maxLength: 3 })
    .map((sets) => JSON.stringify(sets.reduce((o, [pointer, value]) => setAt(o, pointer, value), { metadata: { name }, status: {} })))

const action: fc.Arbitrary<Action> = fc.oneof(
  fc.tuple(fc.constantFrom(...statusKinds), names).chain(([kind, name]) => statusBody(name).map((body): Action => ({ verb: "status", kind, name, body }))),
  fc.tuple(kindArb, names).chain(([kind, name]) => objectBody(kind, name).map((body): Action => ({ verb: "create", kind, name, body }))),
  fc.tuple(kindArb, names).chain(([kind, name]) => objectBody(kind, name).map((body): Action => ({ verb: "update", kind, name, body }))),
  fc.tuple(kindArb, names).chain(([kind, name]) =>
    fc.oneof(
      fc.array(jsonPatchOp(kind), { maxLength: 4 }).map((ops) => ({ contentType: "application/json-patch+json", body: JSON.stringify(ops) })),
      partialObject(kind, false).map((p) => ({ contentType: "application/merge-patch+json", body: JSON.stringify(p) })),
      partialObject(kind, true).map((p) => ({ contentType: "application/strategic-merge-patch+json", body: JSON.stringify(p) }))
    ).map((p): Action => ({ verb: "patch", kind, name, ...p }))
  ),
  fc
    .tuple(names, fc.oneof(fc.nat(10), hostileNumber, hostileValue), fc.boolean())
    .map(([name, replicas, patch]): Action => ({ verb: "scale", name, body: JSON.stringify({ spec: { replicas } }), patch })),
  fc
    .tuple(
      kindArb,
      fc.constantFrom("limit", "resourceVersion", "continue", "timeoutSeconds", "labelSelector", "fieldSelector", "resourceVersionMatch"),
      fc.oneof(hostileString, hostileNumber.map(String), fc.constantFrom("99999999999999999999", "9223372036854775808", "-1", "1"))
    )
    .map(([kind, parameter, value]): Action => ({ verb: "list", kind, query: `${parameter}=${encodeURIComponent(value)}` })),
  fc
    .tuple(
      kindArb,
      names,
      fc.option(fc.record({ gracePeriodSeconds: fc.oneof(fc.nat(60), hostileNumber), propagationPolicy: fc.constantFrom("Background", "Orphan", "x") }), { nil: undefined })
    )
    .map(([kind, name, options]): Action => ({ verb: "delete", kind, name, body: options === undefined ? undefined : JSON.stringify(options) }))
)

// ---- Running a sequence and checking the invariants -----------------------------------------

let namespaceCount = 0

/** What the API last answered for each object it wrote (undefined once deleted). */
type Expected = Map<string, Json | undefined>

const send = (ns: string, a: Action): Promise<Response> => {
  switch (a.verb) {
    case "create":
      return call("POST", `${a.kind.base}/namespaces/${ns}/${a.kind.plural}`, a.body)
    case "update":
      return call("PUT", `${a.kind.base}/namespaces/${ns}/${a.kind.plural}/${a.name}`, a.body)
    case "patch":
      return call("PATCH", `${a.kind.base}/namespaces/${ns}/${a.kind.plural}/${a.name}`, a.body, a.contentType)
    case "scale":
      return call(a.patch ? "PATCH" : "PUT", `/apis/apps/v1/namespaces/${ns}/deployments/${a.name}/scale`, a.body, a.patch ? "application/merge-patch+json" : "application/json")
    case "status":
      return call("PUT", `${a.kind.base}/namespaces/${ns}/${a.kind.plural}/${a.name}/status`, a.body)
    case "list":
      return call("GET", `${a.kind.base}/namespaces/${ns}/${a.kind.plural}?${a.query}`)
    case "delete":
      return call("DELETE", `${a.kind.base}/namespaces/${ns}/${a.kind.plural}/${a.name}`, a.body)
  }
}

const describeAction = (a: Action) => `${a.verb} ${"kind" in a ? a.kind.kind : "Deployment"}${"name" in a ? `/${a.name}` : ""} ${"query" in a ? a.query : ""}${"body" in a && a.body !== undefined ? a.body.slice(0, 300) : ""}`

/** Answers seen, by verb and code: printed at the end, to show what the fuzzer reached. */
const tally = new Map<string, number>()

const runSequence = async (actions: ReadonlyArray<Action>) => {
  const ns = `fuzz-${++namespaceCount}`
  expect((await call("POST", "/api/v1/namespaces", JSON.stringify({ metadata: { name: ns } }))).status).toBe(201)
  const expected: Expected = new Map()
  // Every sequence starts from valid objects of each kind, so its writes meet something to change.
  for (const kind of kinds) {
    for (const name of ["a", "b"]) {
      const created = await call("POST", `${kind.base}/namespaces/${ns}/${kind.plural}`, JSON.stringify(kind.valid(name)))
      expect(created.status, JSON.stringify(created.body)).toBe(201)
      expected.set(`${kind.kind}/${name}`, created.body)
    }
  }
  let newest = Number((await call("GET", `/api/v1/namespaces/${ns}`)).body.metadata.resourceVersion)
  for (const object of expected.values()) newest = Math.max(newest, Number(object.metadata.resourceVersion))
  for (const a of actions) {
    const r = await send(ns, a)
    const what = `${describeAction(a)} → ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`
    const label = `${a.verb}${a.verb === "patch" ? `(${a.contentType.split("/")[1]!.split("-")[0]})` : ""} ${r.status}`
    tally.set(label, (tally.get(label) ?? 0) + 1)
    // The one 5xx Kubernetes answers by design: a list at a resourceVersion the server has not
    // reached yet waits, then gives up with 504 "Too large resource version" (the client retries).
    const tooNew = r.status === 504 && r.body?.details?.causes?.[0]?.reason === "ResourceVersionTooLarge"
    if (!tooNew) expect(r.status, what).toBeLessThan(500)
    if (r.status >= 400) {
      expect(r.body, what).toMatchObject({ kind: "Status", status: "Failure", code: r.status })
      continue
    }
    if (a.verb === "list") {
      expect(r.body.kind, what).toBe(`${a.kind.kind}List`)
      continue
    }
    const kind = a.verb === "scale" ? deploymentKind : a.kind
    const key = `${kind.kind}/${a.name}`
    // Re-read what the write left (a scale or delete answers with something else than the object).
    const now = await call("GET", `${kind.base}/namespaces/${ns}/${kind.plural}/${a.name}`)
    expect(now.status, what).toBeLessThan(500)
    const object = now.status === 404 ? undefined : now.body
    // (A write that removes a deleting object's last finalizer deletes it: nothing to read back.)
    if (a.verb !== "delete" && a.verb !== "scale" && object !== undefined) {
      const rv = Number(r.body.metadata.resourceVersion)
      const previous = expected.get(key)
      const unchanged = previous !== undefined && Number(previous.metadata.resourceVersion) === rv
      expect(Number.isSafeInteger(rv), what).toBe(true)
      if (!unchanged) expect(rv, `${what}: a write's resourceVersion is newer than every earlier one`).toBeGreaterThan(newest)
      expect(object, `${what}: the object reads back as the write answered`).toEqual(r.body)
    }
    if (object !== undefined) newest = Math.max(newest, Number(object.metadata.resourceVersion))
    expected.set(key, object)
  }
  await checkStore(ns, expected)
}

const resourceOf = (registry: Registry.Registry, kind: Kind) => registry.byKind(kind.group === "" ? "v1" : `${kind.group}/v1`, kind.kind)!

/** Every object of the namespace in the store decodes, and reads back as the API last answered. */
const checkStore = async (ns: string, expected: Expected) => {
  for (const kind of kinds) {
    const resource = resourceOf(server.registry, kind)
    const page = await Effect.runPromise(store.list(Keys.prefix(kind.group, kind.plural, ns)))
    const storedNames = new Set<string>()
    for (const kv of page.items) {
      const object = JSON.parse(kv.value)
      const name = object.metadata.name as string
      storedNames.add(name)
      const decoded = resource.decode(object, false)
      expect(Either.isRight(decoded), `${kind.kind}/${name} in the store does not decode: ${JSON.stringify(Either.isLeft(decoded) ? decoded.left : [])}`).toBe(true)
      const read = await call("GET", `${kind.base}/namespaces/${ns}/${kind.plural}/${name}`)
      expect(read.status).toBe(200)
      expect(read.body.metadata.resourceVersion).toBe(String(kv.modRevision))
      const key = `${kind.kind}/${name}`
      if (expected.has(key)) expect(read.body, `${key} reads back as the API last answered`).toEqual(expected.get(key))
    }
    for (const [key, object] of expected) {
      if (key.startsWith(`${kind.kind}/`) && object === undefined) expect(storedNames.has(key.slice(kind.kind.length + 1)), `${key} was deleted`).toBe(false)
    }
  }
}

it("random objects and patches never get a 5xx, a defect or a store the API cannot read back", { timeout: 240_000 }, async () => {
  console.log(`apiFuzz: seed ${seed}, ${numRuns} runs (replay with FLEET_FUZZ_SEED=${seed})`)
  await fc.assert(
    fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 25 }), (actions) => runSequence(actions)),
    { seed, numRuns }
  )
  console.log(`apiFuzz answers: ${[...tally].sort().map(([label, n]) => `${label} ×${n}`).join(", ")}`)
})
