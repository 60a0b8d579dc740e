import { describe, expect, it } from "vitest"
import * as Pods from "../../src/object/Pods.js"

const T0 = Date.parse("2024-05-01T10:00:00Z")
const pod = (phase: string | undefined, ready?: { readonly status: string; readonly since: number }, deleting = false) => ({
  metadata: { name: "p", namespace: "default", ...(deleting ? { deletionTimestamp: "2024-05-01T10:00:00Z" } : {}) },
  status: {
    ...(phase !== undefined ? { phase } : {}),
    ...(ready ? { conditions: [{ type: "Ready", status: ready.status, lastTransitionTime: new Date(ready.since).toISOString() }] } : {})
  }
})

describe("Pods", () => {
  const cases: ReadonlyArray<readonly [string, ReturnType<typeof pod>, { phase: string; active: boolean; ready: boolean; available: boolean }]> = [
    ["pending by default", pod(undefined), { phase: "Pending", active: true, ready: false, available: false }],
    ["running, ready long enough", pod("Running", { status: "True", since: T0 - 20_000 }), { phase: "Running", active: true, ready: true, available: true }],
    ["running, ready too recently", pod("Running", { status: "True", since: T0 - 5_000 }), { phase: "Running", active: true, ready: true, available: false }],
    ["running, not ready", pod("Running", { status: "False", since: T0 - 20_000 }), { phase: "Running", active: true, ready: false, available: false }],
    ["succeeded", pod("Succeeded"), { phase: "Succeeded", active: false, ready: false, available: false }],
    ["terminating", pod("Running", { status: "True", since: T0 - 20_000 }, true), { phase: "Running", active: false, ready: true, available: true }]
  ]
  it.each(cases)("%s", (_name, p, want) => {
    expect(Pods.phase(p)).toBe(want.phase)
    expect(Pods.isActive(p)).toBe(want.active)
    expect(Pods.isReady(p)).toBe(want.ready)
    expect(Pods.isAvailable(p, 10, T0)).toBe(want.available)
  })

  it("msUntilAvailable counts down from the Ready transition", () => {
    expect(Pods.msUntilAvailable(pod("Running", { status: "True", since: T0 - 5_000 }), 10, T0)).toBe(5_000)
    expect(Pods.msUntilAvailable(pod("Running", { status: "True", since: T0 - 20_000 }), 10, T0)).toBeUndefined()
  })

  it("templateHash is stable, key-order-free and salted by collisionCount", () => {
    const a = Pods.templateHash({ spec: { x: 1, y: 2 } })
    expect(Pods.templateHash({ spec: { y: 2, x: 1 } })).toBe(a)
    expect(Pods.templateHash({ spec: { x: 1, y: 2 } }, 1)).not.toBe(a)
    expect(a).toMatch(/^[bcdfghjklmnpqrstvwxz2456789]+$/)
  })

  it("fromTemplate stamps a controlled pod", () => {
    const owner = { apiVersion: "apps/v1", kind: "ReplicaSet", metadata: { name: "rs", namespace: "ns", uid: "u" } }
    const p = Pods.fromTemplate({ metadata: { labels: { app: "a" } }, spec: { containers: [] } }, owner, { extraLabels: { x: "1" } })
    expect(p["metadata"]).toEqual({
      generateName: "rs-",
      namespace: "ns",
      labels: { app: "a", x: "1" },
      ownerReferences: [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: "rs", uid: "u", controller: true, blockOwnerDeletion: true }]
    })
  })
})
