import { describe, expect, it } from "vitest"
import { createErrors } from "./harness.js"

const deployment = (spec: Record<string, unknown>, podSpec: Record<string, unknown> = {}) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "web", namespace: "default" },
  spec: {
    selector: { matchLabels: { app: "web" } },
    template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "web", image: "nginx" }], ...podSpec } },
    ...spec
  }
})

describe("Deployment validation (as kube-apiserver words it)", () => {
  it.each([
    ["maxSurge and maxUnavailable both 0", { strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 0, maxUnavailable: 0 } } }, {}, "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0"],
    ["both 0%", { strategy: { rollingUpdate: { maxSurge: "0%", maxUnavailable: "0%" } } }, {}, "may not be 0 when `maxSurge` is 0"],
    ["maxUnavailable over 100%", { strategy: { rollingUpdate: { maxUnavailable: "150%" } } }, {}, 'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "150%": must not be greater than 100%'],
    ["rollingUpdate with Recreate", { strategy: { type: "Recreate", rollingUpdate: { maxSurge: 1 } } }, {}, "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"],
    ["deadline not above minReadySeconds", { minReadySeconds: 30, progressDeadlineSeconds: 30 }, {}, "spec.progressDeadlineSeconds: Invalid value: 30: must be greater than minReadySeconds"],
    ["pods that do not restart", {}, { restartPolicy: "Never" }, 'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"']
  ])("refuses %s", (_name, spec, podSpec, message) => {
    expect(createErrors(deployment(spec, podSpec)).join("\n")).toContain(message)
  })

  it.each([
    ["the defaults", {}],
    ["surge only", { strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } }],
    ["Recreate", { strategy: { type: "Recreate" } }],
    ["a deadline above minReadySeconds", { minReadySeconds: 10, progressDeadlineSeconds: 11 }]
  ])("accepts %s", (_name, spec) => {
    expect(createErrors(deployment(spec))).toEqual([])
  })
})
