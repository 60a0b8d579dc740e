import { Effect, Either } from "effect"
import { describe, expect, it } from "@effect/vitest"
import * as Priority from "../../src/admission/Priority.js"
import { namespace, pod, start, type Harness } from "./harness.js"
import { request } from "./requests.js"

const cls = (name: string, value: number, extra: Partial<Priority.ClassInfo> = {}): Priority.ClassInfo => ({
  name,
  value,
  globalDefault: false,
  preemptionPolicy: "PreemptLowerPriority",
  ...extra
})
const withSpec = (spec: Record<string, unknown>) => ({ ...pod("p"), spec: { ...pod("p").spec, ...spec } })

describe("Priority.resolvePod", () => {
  const high = cls("high", 1000)
  const never = cls("batch", 10, { preemptionPolicy: "Never" })
  const def = cls("normal", 5, { globalDefault: true })
  const cases: ReadonlyArray<[string, Record<string, unknown>, Priority.ClassInfo | undefined, Priority.ClassInfo | undefined, Record<string, unknown> | string]> = [
    ["a named class gives its value and policy", { priorityClassName: "high" }, high, undefined, { priorityClassName: "high", priority: 1000, preemptionPolicy: "PreemptLowerPriority" }],
    ["a Never class gives Never", { priorityClassName: "batch" }, never, undefined, { priorityClassName: "batch", priority: 10, preemptionPolicy: "Never" }],
    ["no class and no default: 0 and PreemptLowerPriority", {}, undefined, undefined, { priority: 0, preemptionPolicy: "PreemptLowerPriority" }],
    ["no class: the global default, by name", {}, undefined, def, { priorityClassName: "normal", priority: 5, preemptionPolicy: "PreemptLowerPriority" }],
    ["an unknown class is refused", { priorityClassName: "nope" }, undefined, def, "no PriorityClass with name nope was found"],
    ["the same priority given by the pod is accepted", { priorityClassName: "high", priority: 1000 }, high, undefined, { priorityClassName: "high", priority: 1000, preemptionPolicy: "PreemptLowerPriority" }],
    [
      "another priority given by the pod is refused",
      { priorityClassName: "high", priority: 7 },
      high,
      undefined,
      "the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name"
    ],
    [
      "a priority given without any class is checked against 0",
      { priority: 3 },
      undefined,
      undefined,
      "the integer value of priority (3) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name"
    ],
    [
      "another preemption policy given by the pod is refused",
      { priorityClassName: "batch", preemptionPolicy: "PreemptLowerPriority" },
      never,
      undefined,
      "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name"
    ],
    ["a class without a policy leaves the pod's own", { priorityClassName: "old", preemptionPolicy: "Never" }, cls("old", 1, { preemptionPolicy: undefined }), undefined, { priorityClassName: "old", priority: 1, preemptionPolicy: "Never" }]
  ]
  it.each(cases)("%s", (_what, spec, named, fallback, want) => {
    const r = Priority.resolvePod(withSpec(spec), named, fallback)
    if (typeof want === "string") expect(Either.isLeft(r) && r.left).toBe(want)
    else {
      const got = Either.getOrThrow(r).spec as Record<string, unknown>
      expect({ priorityClassName: got["priorityClassName"], priority: got["priority"], preemptionPolicy: got["preemptionPolicy"] }).toEqual({
        priorityClassName: undefined,
        ...want
      })
      expect(got["containers"]).toEqual(pod("p").spec.containers)
    }
  })

  it("picks the lowest-valued of several defaults (a race) and knows the built-in classes", () => {
    expect(Priority.defaultClass([cls("a", 9, { globalDefault: true }), cls("b", 3, { globalDefault: true }), cls("c", 1)])?.name).toBe("b")
    expect(Priority.defaultClass([cls("c", 1)])).toBeUndefined()
    expect(Priority.systemClasses.map((c) => [c.name, c.value])).toEqual([
      ["system-node-critical", 2000001000],
      ["system-cluster-critical", 2000000000]
    ])
  })

  it("keeps the stored priority and policy on an update that leaves them out", () => {
    const old = withSpec({ priority: 1000, preemptionPolicy: "Never", priorityClassName: "high" })
    const body = withSpec({ priorityClassName: "high" })
    expect((Priority.keepOnUpdate(body, old).spec as any).priority).toBe(1000)
    expect((Priority.keepOnUpdate(body, old).spec as any).preemptionPolicy).toBe("Never")
    expect(Priority.keepOnUpdate(old, old)).toBe(old)
  })
})

describe("Priority.checkClass", () => {
  const current = cls("a", 1, { globalDefault: true })
  const body = (name: string, globalDefault: boolean) => ({ metadata: { name }, value: 1, globalDefault })
  const message = "PriorityClass a is already marked as default. Only one default can exist"
  it.each<[string, "CREATE" | "UPDATE", Record<string, unknown>, Priority.ClassInfo | undefined, string | undefined]>([
    ["a second default is refused", "CREATE", body("b", true), current, message],
    ["marking another class default is refused", "UPDATE", body("b", true), current, message],
    ["the default itself may be updated", "UPDATE", body("a", true), current, undefined],
    ["the first default is accepted", "CREATE", body("b", true), undefined, undefined],
    ["a non-default class is accepted", "CREATE", body("b", false), current, undefined]
  ])("%s", (_what, op, pc, cur, want) => expect(Priority.checkClass(op, pc, cur)).toBe(want))
})

describe("Priority plugin", () => {
  const classes: Priority.ClassLookup = { get: (n) => Effect.succeed(n === "high" ? cls("high", 1000) : undefined), list: Effect.succeed([]) }
  const plugin = Priority.make({ store: undefined as never, classes })
  it.effect("touches only pod creates and updates, not subresources or other kinds", () =>
    Effect.gen(function* () {
      const p = withSpec({ priorityClassName: "high" })
      expect(((yield* plugin.mutate!(request("CREATE", "", "pods", { object: p }))).spec as any).priority).toBe(1000)
      const status = request("CREATE", "", "pods", { object: p, subresource: "status" })
      expect(yield* plugin.mutate!(status)).toBe(p)
      const cm = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } }
      expect(yield* plugin.mutate!(request("CREATE", "", "configmaps", { object: cm }))).toBe(cm)
      expect(yield* plugin.validate!(request("CREATE", "", "pods", { object: p }))).toEqual([])
    })
  )
})

// Through the API server: classes stored in the store, 403s as kubectl shows them.
describe("Priority admission in the API server", () => {
  const setup = Effect.gen(function* () {
    const h = yield* start((store) => Effect.succeed([Priority.make({ store })]))
    yield* Effect.promise(() => h.call("POST", "/api/v1/namespaces", namespace("default")))
    return h
  })
  const createClass = (h: Harness, name: string, value: number, extra: Record<string, unknown> = {}) =>
    Effect.promise(() =>
      h.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {
        apiVersion: "scheduling.k8s.io/v1",
        kind: "PriorityClass",
        metadata: { name },
        value,
        preemptionPolicy: "PreemptLowerPriority",
        ...extra
      })
    )
  const createPod = (h: Harness, name: string, spec: Record<string, unknown> = {}) =>
    Effect.promise(() => h.call("POST", "/api/v1/namespaces/default/pods", { ...pod(name), spec: { ...pod(name).spec, ...spec } }))

  it.scoped("resolves named, default and built-in classes and refuses unknown ones", () =>
    Effect.gen(function* () {
      const h = yield* setup
      expect((yield* createClass(h, "high", 1000, { preemptionPolicy: "Never" })).status).toBe(201)
      const named = yield* createPod(h, "a", { priorityClassName: "high" })
      expect([named.status, named.body.spec.priority, named.body.spec.preemptionPolicy]).toEqual([201, 1000, "Never"])

      const plain = yield* createPod(h, "b")
      expect([plain.body.spec.priority, plain.body.spec.priorityClassName, plain.body.spec.preemptionPolicy]).toEqual([0, undefined, "PreemptLowerPriority"])

      const critical = yield* createPod(h, "c", { priorityClassName: "system-node-critical" })
      expect(critical.body.spec.priority).toBe(2000001000)

      const unknown = yield* createPod(h, "d", { priorityClassName: "nope" })
      expect([unknown.status, unknown.body.message]).toEqual([403, 'pods "d" is forbidden: no PriorityClass with name nope was found'])

      expect((yield* createClass(h, "normal", 5, { globalDefault: true })).status).toBe(201)
      const defaulted = yield* createPod(h, "e")
      expect([defaulted.body.spec.priorityClassName, defaulted.body.spec.priority]).toEqual(["normal", 5])

      const second = yield* createClass(h, "other", 7, { globalDefault: true })
      expect([second.status, second.body.message]).toEqual([
        403,
        'priorityclasses.scheduling.k8s.io "other" is forbidden: PriorityClass normal is already marked as default. Only one default can exist'
      ])
    })
  )
})
