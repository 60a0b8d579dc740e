// autoscaling/v2 HorizontalPodAutoscaler: kube-apiserver's defaults, its validation messages,
// and kubectl's TARGETS column.
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as Autoscaling from "../../src/model/Autoscaling.js"
import { decodeObject } from "../../src/model/Decode.js"
import * as FieldError from "../../src/model/FieldError.js"

type Json = Record<string, any>

const hpa = (spec: Json, status?: Json): Json => ({
  apiVersion: "autoscaling/v2",
  kind: "HorizontalPodAutoscaler",
  metadata: { name: "web", namespace: "default" },
  spec: { scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "web" }, maxReplicas: 5, ...spec },
  ...(status === undefined ? {} : { status })
})

const cpu = (averageUtilization: number) => ({ type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization } } })

/** The errors kube-apiserver would answer for `spec` (after defaulting), as `path: message`. */
const errors = (spec: Json): ReadonlyArray<string> => {
  const decoded = decodeObject(Autoscaling.HorizontalPodAutoscaler, Autoscaling.defaults(hpa(spec)))
  return Either.isLeft(decoded) ? decoded.left.map(FieldError.format) : Autoscaling.validate(decoded.right).map(FieldError.format)
}

describe("Autoscaling.defaults", () => {
  it("fills minReplicas 1 and cpu at 80% when no metrics are given, and leaves behavior absent", () => {
    expect(Autoscaling.defaults(hpa({}))["spec"]).toEqual({
      scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "web" },
      maxReplicas: 5,
      minReplicas: 1,
      metrics: [cpu(80)]
    })
  })

  it("fills both directions of a behavior, keeping what the user set", () => {
    const behavior = Autoscaling.defaults(hpa({ behavior: { scaleDown: { stabilizationWindowSeconds: 60 } } }))["spec"]["behavior"]
    expect(behavior).toEqual({
      scaleUp: {
        stabilizationWindowSeconds: 0,
        selectPolicy: "Max",
        policies: [
          { type: "Pods", value: 4, periodSeconds: 15 },
          { type: "Percent", value: 100, periodSeconds: 15 }
        ]
      },
      scaleDown: { selectPolicy: "Max", policies: [{ type: "Percent", value: 100, periodSeconds: 15 }], stabilizationWindowSeconds: 60 }
    })
  })

  it("is idempotent", () => {
    const once = Autoscaling.defaults(hpa({ behavior: {} }))
    expect(Autoscaling.defaults(once)).toEqual(once)
  })
})

describe("Autoscaling.validate", () => {
  const cases: ReadonlyArray<[string, Json, ReadonlyArray<string>]> = [
    ["a valid object", { minReplicas: 2, metrics: [cpu(50)] }, []],
    ["minReplicas 0", { minReplicas: 0 }, ["spec.minReplicas: Invalid value: 0: must be greater than or equal to 1"]],
    ["maxReplicas below minReplicas", { minReplicas: 6 }, ["spec.maxReplicas: Invalid value: 5: must be greater than or equal to `minReplicas`"]],
    ["maxReplicas 0", { minReplicas: 1, maxReplicas: 0 }, ["spec.maxReplicas: Invalid value: 0: must be greater than 0", "spec.maxReplicas: Invalid value: 0: must be greater than or equal to `minReplicas`"]],
    ["a target without a name", { scaleTargetRef: { kind: "Deployment", name: "" } }, ["spec.scaleTargetRef.name: Required value"]],
    ["a target name with a slash", { scaleTargetRef: { kind: "Deployment", name: "a/b" } }, [`spec.scaleTargetRef.name: Invalid value: "a/b": may not contain '/'`]],
    ["utilization 0", { metrics: [cpu(0)] }, ["spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"]],
    [
      "a resource metric without a target value",
      { metrics: [{ type: "Resource", resource: { name: "cpu", target: { type: "Utilization" } } }] },
      ["spec.metrics[0].resource.target.averageUtilization: Required value: must set either a target raw value or a target utilization"]
    ],
    [
      "both a utilization and an average value",
      { metrics: [{ type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 50, averageValue: "100m" } } }] },
      ["spec.metrics[0].resource.target.averageValue: Forbidden: may not set both a target raw value and a target utilization"]
    ],
    [
      "an unknown target type",
      { metrics: [{ type: "Resource", resource: { name: "cpu", target: { type: "Percent", averageUtilization: 50 } } }] },
      [`spec.metrics[0].resource.target.type: Invalid value: "Percent": must be either Utilization, Value, or AverageValue`]
    ],
    [
      "an unknown metric type",
      { metrics: [{ type: "Magic" }] },
      [`spec.metrics[0].type: Unsupported value: "Magic": supported values: "ContainerResource", "External", "Object", "Pods", "Resource"`]
    ],
    ["a type without its source", { metrics: [{ type: "Resource" }] }, ["spec.metrics[0].resource: Required value: must populate information for the given metric source"]],
    [
      "two sources in one metric",
      { metrics: [{ ...cpu(50), pods: { metric: { name: "qps" }, target: { type: "AverageValue", averageValue: "1" } } }] },
      ["spec.metrics[0].pods: Forbidden: must populate the given metric source only"]
    ],
    [
      "a negative average value",
      { metrics: [{ type: "Resource", resource: { name: "memory", target: { type: "AverageValue", averageValue: "-1Mi" } } }] },
      [`spec.metrics[0].resource.target.averageValue: Invalid value: "-1Mi": must be positive`]
    ],
    [
      "behavior: a window too long, a period too long, an unknown policy",
      {
        behavior: {
          scaleUp: { stabilizationWindowSeconds: 3601, policies: [{ type: "Pods", value: 1, periodSeconds: 1801 }] },
          scaleDown: { selectPolicy: "Sometimes", policies: [{ type: "Fraction", value: 0, periodSeconds: 0 }] }
        }
      },
      [
        "spec.behavior.scaleUp.stabilizationWindowSeconds: Invalid value: 3601: must be less than or equal to 3600",
        "spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 1801: must be less than or equal to 1800",
        `spec.behavior.scaleDown.selectPolicy: Unsupported value: "Sometimes": supported values: "Disabled", "Max", "Min"`,
        `spec.behavior.scaleDown.policies[0].type: Unsupported value: "Fraction": supported values: "Percent", "Pods"`,
        "spec.behavior.scaleDown.policies[0].value: Invalid value: 0: must be greater than zero",
        "spec.behavior.scaleDown.policies[0].periodSeconds: Invalid value: 0: must be greater than zero"
      ]
    ],
    ["behavior: an empty policy list", { behavior: { scaleUp: { policies: [] } } }, ["spec.behavior.scaleUp.policies: Required value: must specify at least one Policy"]]
  ]
  it.each(cases)("%s", (_name, spec, want) => {
    expect(errors(spec)).toEqual(want)
  })
})

describe("Autoscaling.formatTargets (kubectl's TARGETS)", () => {
  const cases: ReadonlyArray<[string, Json, ReadonlyArray<Json> | undefined, string]> = [
    ["before the first measurement", { metrics: [cpu(80)] }, undefined, "cpu: <unknown>/80%"],
    ["a utilization", { metrics: [cpu(80)] }, [{ type: "Resource", resource: { name: "cpu", current: { averageUtilization: 42, averageValue: "42m" } } }], "cpu: 42%/80%"],
    [
      "an average value",
      { metrics: [{ type: "Resource", resource: { name: "memory", target: { type: "AverageValue", averageValue: "200Mi" } } }] },
      [{ type: "Resource", resource: { name: "memory", current: { averageValue: "100Mi" } } }],
      "memory: 100Mi/200Mi"
    ],
    ["more than two", { metrics: [cpu(10), cpu(20), cpu(30)] }, undefined, "cpu: <unknown>/10%, cpu: <unknown>/20% + 1 more..."]
  ]
  it.each(cases)("%s", (_name, spec, current, want) => {
    expect(Autoscaling.formatTargets(hpa(spec, current === undefined ? {} : { currentMetrics: current }))).toBe(want)
  })
})
