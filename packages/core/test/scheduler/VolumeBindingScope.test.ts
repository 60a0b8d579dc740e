import { describe, expect, it } from "@effect/vitest"
import * as VolumeBindingScope from "../../src/scheduler/VolumeBindingScope.js"
import { pod } from "./plugins/fixtures.js"

const claims: Record<string, Record<string, unknown>> = {
  local: { metadata: { name: "local" }, spec: { storageClassName: "local" } },
  beta: { metadata: { name: "beta", annotations: { "volume.beta.kubernetes.io/storage-class": "local" } }, spec: {} },
  remote: { metadata: { name: "remote" }, spec: { storageClassName: "remote" } },
  bound: { metadata: { name: "bound" }, spec: { storageClassName: "remote", volumeName: "pv1" } },
  deleting: { metadata: { name: "deleting", deletionTimestamp: "2026-01-01T00:00:00Z" }, spec: { storageClassName: "remote" } },
  "p-scratch": { metadata: { name: "p-scratch" }, spec: { storageClassName: "remote" } }
}
const lookup = (_ns: string, name: string) => claims[name]

describe("VolumeBindingScope", () => {
  it.each([
    { name: "not a claim", volume: { name: "v", emptyDir: {} }, judged: true },
    { name: "a claim of a waiting class", volume: { name: "v", persistentVolumeClaim: { claimName: "local" } }, judged: true },
    { name: "the class from the beta annotation", volume: { name: "v", persistentVolumeClaim: { claimName: "beta" } }, judged: true },
    { name: "an unbound claim of another class", volume: { name: "v", persistentVolumeClaim: { claimName: "remote" } }, judged: false },
    { name: "a bound claim", volume: { name: "v", persistentVolumeClaim: { claimName: "bound" } }, judged: true },
    { name: "a deleting claim", volume: { name: "v", persistentVolumeClaim: { claimName: "deleting" } }, judged: true },
    { name: "a missing claim", volume: { name: "v", persistentVolumeClaim: { claimName: "missing" } }, judged: true },
    { name: "an ephemeral volume's claim", volume: { name: "scratch", ephemeral: {} }, judged: false }
  ])("VolumeBinding judges $name: $judged", ({ volume, judged }) => {
    expect(VolumeBindingScope.concerns(new Set(["local"]), lookup, pod({ name: "p" }), volume)).toBe(judged)
  })
})
