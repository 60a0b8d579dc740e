import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as DefaultTolerationSeconds from "../../src/admission/DefaultTolerationSeconds.js"
import { request } from "./requests.js"

const notReady = (seconds = 300) => ({ key: DefaultTolerationSeconds.notReadyTaint, operator: "Exists", effect: "NoExecute", tolerationSeconds: seconds })
const unreachable = (seconds = 300) => ({ key: DefaultTolerationSeconds.unreachableTaint, operator: "Exists", effect: "NoExecute", tolerationSeconds: seconds })
const pod = (tolerations?: ReadonlyArray<Record<string, unknown>>) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: "a" },
  spec: { containers: [{ name: "c", image: "x" }], ...(tolerations === undefined ? {} : { tolerations }) }
})

describe("DefaultTolerationSeconds.decide", () => {
  const cases: ReadonlyArray<[string, ReadonlyArray<Record<string, unknown>> | undefined, ReadonlyArray<Record<string, unknown>>]> = [
    ["no tolerations: both added", undefined, [notReady(), unreachable()]],
    ["other tolerations kept, both added", [{ key: "gpu", operator: "Exists" }], [{ key: "gpu", operator: "Exists" }, notReady(), unreachable()]],
    ["not-ready already tolerated: only unreachable added", [notReady(60)], [notReady(60), unreachable()]],
    ["unreachable tolerated forever: only not-ready added", [{ key: DefaultTolerationSeconds.unreachableTaint, operator: "Exists", effect: "NoExecute" }], [{ key: DefaultTolerationSeconds.unreachableTaint, operator: "Exists", effect: "NoExecute" }, notReady()]],
    ["an empty effect covers NoExecute", [{ key: DefaultTolerationSeconds.notReadyTaint, operator: "Exists" }], [{ key: DefaultTolerationSeconds.notReadyTaint, operator: "Exists" }, unreachable()]],
    ["an empty key covers both", [{ operator: "Exists" }], [{ operator: "Exists" }]],
    ["a NoSchedule toleration does not count", [{ key: DefaultTolerationSeconds.notReadyTaint, operator: "Exists", effect: "NoSchedule" }], [{ key: DefaultTolerationSeconds.notReadyTaint, operator: "Exists", effect: "NoSchedule" }, notReady(), unreachable()]]
  ]
  it.each(cases)("%s", (_what, tolerations, expected) => {
    expect((DefaultTolerationSeconds.decide(pod(tolerations)) as any).spec.tolerations).toEqual(expected)
  })

  it("answers the same pod when nothing is missing, and uses the configured seconds", () => {
    const p = pod([notReady(), unreachable()])
    expect(DefaultTolerationSeconds.decide(p)).toBe(p)
    const out = DefaultTolerationSeconds.decide(pod(), { defaultNotReadyTolerationSeconds: 2, defaultUnreachableTolerationSeconds: 3 }) as any
    expect(out.spec.tolerations).toEqual([notReady(2), unreachable(3)])
  })
})

describe("DefaultTolerationSeconds plugin", () => {
  const plugin = DefaultTolerationSeconds.make()
  const run = (req: Parameters<NonNullable<typeof plugin.mutate>>[0]) => Effect.runSync(plugin.mutate!(req)) as any
  it("mutates pods on create and update, not their subresources, deletes or other kinds", () => {
    expect(run(request("CREATE", "", "pods", { object: pod() })).spec.tolerations).toHaveLength(2)
    expect(run(request("UPDATE", "", "pods", { object: pod(), oldObject: pod() })).spec.tolerations).toHaveLength(2)
    expect(run(request("UPDATE", "", "pods", { object: pod(), oldObject: pod(), subresource: "status" })).spec.tolerations).toBeUndefined()
    expect(run(request("DELETE", "", "pods", { object: pod() })).spec.tolerations).toBeUndefined()
    const cm = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } }
    expect(run(request("CREATE", "", "configmaps", { object: cm }))).toBe(cm)
  })
})
