import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as FieldSelector from "../../src/api/FieldSelector.js"
import { Kinds } from "../../src/model/index.js"

const Pod = { apiVersion: "v1", kind: "Pod" }

const parsed = (input: string, kind = Pod): FieldSelector.FieldSelector => {
  const r = FieldSelector.parseFor(input, kind)
  if (Either.isLeft(r)) throw new Error(r.left.message)
  return r.right
}

const failure = (input: string, kind = Pod) => {
  const r = FieldSelector.parseFor(input, kind)
  if (Either.isRight(r)) throw new Error(`expected ${JSON.stringify(input)} to fail`)
  return r.left.status
}

describe("FieldSelector.parse", () => {
  it.each([
    ["", []],
    ["metadata.name=foo", [{ field: "metadata.name", operator: "=", value: "foo" }]],
    ["metadata.name==foo", [{ field: "metadata.name", operator: "=", value: "foo" }]],
    ["status.phase!=Running", [{ field: "status.phase", operator: "!=", value: "Running" }]],
    ["spec.nodeName=", [{ field: "spec.nodeName", operator: "=", value: "" }]],
    // Terms are sorted, as the Kubernetes fields package sorts them.
    [
      "status.phase!=Running,metadata.name=foo",
      [
        { field: "metadata.name", operator: "=", value: "foo" },
        { field: "status.phase", operator: "!=", value: "Running" }
      ]
    ],
    // Empty terms are skipped.
    ["metadata.name=foo,,", [{ field: "metadata.name", operator: "=", value: "foo" }]],
    // Escapes: \, \= \\ stand for the character; an escaped comma does not split.
    ["metadata.name=a\\,b", [{ field: "metadata.name", operator: "=", value: "a,b" }]],
    ["metadata.name=a\\=b\\\\c", [{ field: "metadata.name", operator: "=", value: "a=b\\c" }]],
    // The first operator splits: `a=b=c` has the value `b=c`, which needs escaping (below).
    ["metadata.name!==x", undefined]
  ] as const)("%j", (input, expected) => {
    const r = FieldSelector.parse(input)
    if (expected === undefined) {
      expect(Either.isLeft(r)).toBe(true)
    } else {
      expect(r).toEqual(Either.right({ requirements: expected }))
    }
  })

  it.each([
    ["foo", "invalid selector: 'foo'; can't understand 'foo'"],
    ["metadata.name=foo,bar", "invalid selector: 'metadata.name=foo,bar'; can't understand 'bar'"],
    ["metadata.name=a=b", "invalid field selector: unescaped character in value: 61"],
    ["metadata.name=a\\x", "invalid field selector: invalid escape sequence: \\x"],
    ["metadata.name=a\\", "invalid field selector: invalid escape sequence: \\"]
  ])("rejects %j with kube-apiserver's message", (input, message) => {
    const r = FieldSelector.parse(input)
    expect(Either.isLeft(r) && r.left.status).toMatchObject({ code: 400, reason: "BadRequest", message })
  })

  it("escapes values so that they parse back", () => {
    const value = "a,b=c\\d"
    const s = `metadata.name=${FieldSelector.escapeValue(value)}`
    expect(parsed(s).requirements[0]?.value).toBe(value)
    expect(FieldSelector.format(parsed(s))).toBe(s)
  })
})

describe("FieldSelector.validateFor", () => {
  it.each([
    [Pod, "spec.nodeName=n1,status.phase=Running,spec.restartPolicy=Always,spec.schedulerName=s"],
    [Pod, "spec.serviceAccountName=sa,spec.hostNetwork=true,status.podIP=10.0.0.1,status.nominatedNodeName=n"],
    [Pod, "metadata.name=a,metadata.namespace=b"],
    [{ apiVersion: "v1", kind: "Node" }, "metadata.name=n,spec.unschedulable=true"],
    [{ apiVersion: "v1", kind: "Namespace" }, "metadata.name=n,status.phase=Active"],
    [{ apiVersion: "v1", kind: "Secret" }, "type=Opaque,metadata.namespace=x"],
    [{ apiVersion: "v1", kind: "Service" }, "spec.clusterIP!=None,spec.type=ClusterIP"],
    [{ apiVersion: "v1", kind: "Event" }, "involvedObject.kind=Pod,involvedObject.name=web,involvedObject.namespace=a"],
    [{ apiVersion: "v1", kind: "Event" }, "involvedObject.uid=u,involvedObject.apiVersion=v1,involvedObject.resourceVersion=1"],
    [{ apiVersion: "v1", kind: "Event" }, "involvedObject.fieldPath=f,reason=r,reportingComponent=c,source=s,type=Normal"],
    [{ apiVersion: "apps/v1", kind: "ReplicaSet" }, "status.replicas=3"],
    [{ apiVersion: "apps/v1", kind: "Deployment" }, "metadata.name=d,metadata.namespace=n"],
    [{ apiVersion: "v1", kind: "ConfigMap" }, "metadata.name=c"],
    [{ apiVersion: "example.com/v1", kind: "Widget" }, "metadata.name=w"]
  ])("accepts %j: %s", (kind, input) => {
    expect(Either.isRight(FieldSelector.parseFor(input, kind))).toBe(true)
  })

  it.each([
    [Pod, "spec.foo=x", "spec.foo"],
    [Pod, "status.podIP=1,spec.bar=2", "spec.bar"],
    [{ apiVersion: "v1", kind: "Node" }, "metadata.namespace=x", "metadata.namespace"],
    [{ apiVersion: "v1", kind: "Namespace" }, "metadata.namespace=x", "metadata.namespace"],
    [{ apiVersion: "apps/v1", kind: "Deployment" }, "status.replicas=1", "status.replicas"],
    [{ apiVersion: "v1", kind: "ConfigMap" }, "type=x", "type"],
    [{ apiVersion: "v1", kind: "Event" }, "involvedObject.foo=x", "involvedObject.foo"]
  ])("rejects %j %s: field label not supported", (kind, input, field) => {
    expect(failure(input, kind)).toMatchObject({ code: 400, reason: "BadRequest", message: `field label not supported: ${field}` })
  })

  it("converts the legacy Pod field spec.host to spec.nodeName", () => {
    expect(parsed("spec.host=n1").requirements).toEqual([{ field: "spec.nodeName", operator: "=", value: "n1" }])
  })

  it("accepts a KindInfo from the registry", () => {
    const info = Kinds.all.find((k) => k.kind === "Pod")!
    expect(Either.isRight(FieldSelector.parseFor("spec.nodeName=n1", info))).toBe(true)
    expect(FieldSelector.supportedFields(info)).toContain("status.phase")
  })
})

describe("FieldSelector.fieldsOf", () => {
  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "web", namespace: "prod" },
    spec: { nodeName: "n1", restartPolicy: "Always", schedulerName: "default-scheduler", serviceAccountName: "sa", hostNetwork: true },
    status: { phase: "Running", podIP: "10.0.0.9", podIPs: [{ ip: "10.0.0.1" }, { ip: "fd00::1" }], nominatedNodeName: "n2" }
  }

  it.each([
    [
      Pod,
      pod,
      {
        "metadata.name": "web",
        "metadata.namespace": "prod",
        "spec.nodeName": "n1",
        "spec.restartPolicy": "Always",
        "spec.schedulerName": "default-scheduler",
        "spec.serviceAccountName": "sa",
        "spec.hostNetwork": "true",
        "status.phase": "Running",
        // From the first entry of podIPs, as Kubernetes does.
        "status.podIP": "10.0.0.1",
        "status.nominatedNodeName": "n2"
      }
    ],
    [
      Pod,
      { metadata: { name: "bare", namespace: "d" } },
      {
        "metadata.name": "bare",
        "metadata.namespace": "d",
        "spec.nodeName": "",
        "spec.restartPolicy": "",
        "spec.schedulerName": "",
        "spec.serviceAccountName": "",
        "spec.hostNetwork": "false",
        "status.phase": "",
        "status.podIP": "",
        "status.nominatedNodeName": ""
      }
    ],
    [
      { apiVersion: "v1", kind: "Node" },
      { metadata: { name: "n1" }, spec: { unschedulable: true } },
      { "metadata.name": "n1", "metadata.namespace": "", "spec.unschedulable": "true" }
    ],
    [
      { apiVersion: "v1", kind: "Namespace" },
      { metadata: { name: "prod" }, status: { phase: "Terminating" } },
      { "metadata.name": "prod", "metadata.namespace": "", "status.phase": "Terminating" }
    ],
    [
      { apiVersion: "v1", kind: "Secret" },
      { metadata: { name: "s", namespace: "d" }, type: "kubernetes.io/tls" },
      { "metadata.name": "s", "metadata.namespace": "d", type: "kubernetes.io/tls" }
    ],
    [
      { apiVersion: "v1", kind: "Event" },
      {
        metadata: { name: "e", namespace: "d" },
        involvedObject: { kind: "Pod", namespace: "d", name: "web", uid: "u1", apiVersion: "v1", resourceVersion: "7", fieldPath: "spec.containers{app}" },
        reason: "Scheduled",
        reportingComponent: "fleet-scheduler",
        source: { component: "default-scheduler" },
        type: "Normal"
      },
      {
        "metadata.name": "e",
        "metadata.namespace": "d",
        "involvedObject.kind": "Pod",
        "involvedObject.namespace": "d",
        "involvedObject.name": "web",
        "involvedObject.uid": "u1",
        "involvedObject.apiVersion": "v1",
        "involvedObject.resourceVersion": "7",
        "involvedObject.fieldPath": "spec.containers{app}",
        reason: "Scheduled",
        reportingComponent: "fleet-scheduler",
        source: "default-scheduler",
        type: "Normal"
      }
    ],
    [
      { apiVersion: "apps/v1", kind: "ReplicaSet" },
      { metadata: { name: "rs", namespace: "d" }, status: { replicas: 3 } },
      { "metadata.name": "rs", "metadata.namespace": "d", "status.replicas": "3" }
    ],
    [
      { apiVersion: "apps/v1", kind: "Deployment" },
      { metadata: { name: "dep", namespace: "d" }, status: { replicas: 3 } },
      { "metadata.name": "dep", "metadata.namespace": "d" }
    ]
  ])("%j", (kind, object, expected) => {
    expect(FieldSelector.fieldsOf(kind, object)).toEqual(expected)
  })

  it("falls back to the reporting controller for an Event's source", () => {
    const fields = FieldSelector.fieldsOf({ apiVersion: "v1", kind: "Event" }, { reportingComponent: "kubelet" })
    expect(fields["source"]).toBe("kubelet")
  })
})

describe("FieldSelector.compile", () => {
  const fields = FieldSelector.fieldsOf(Pod, {
    metadata: { name: "web", namespace: "prod" },
    spec: { nodeName: "n1" },
    status: { phase: "Running" }
  })

  it.each([
    ["", true],
    ["metadata.name=web", true],
    ["metadata.name==web", true],
    ["metadata.name=api", false],
    ["metadata.name!=api", true],
    ["status.phase!=Running", false],
    ["spec.nodeName=n1,status.phase=Running", true],
    ["spec.nodeName=n1,status.phase=Pending", false],
    ["spec.nodeName!=,metadata.namespace=prod", true],
    ["status.nominatedNodeName=", true]
  ])("%j → %s", (input, expected) => {
    const selector = parsed(input)
    expect(FieldSelector.compile(selector)(fields)).toBe(expected)
    expect(FieldSelector.matches(selector, fields)).toBe(expected)
  })

  it("treats a missing field as the empty string", () => {
    expect(FieldSelector.compile(parsed("spec.nodeName="))({})).toBe(true)
    expect(FieldSelector.compile(parsed("spec.nodeName!=,metadata.name=x"))({ "metadata.name": "x" })).toBe(false)
  })

  it("finds the value a selector pins a field to", () => {
    expect(FieldSelector.exactValue(parsed("metadata.name=web,status.phase!=x"), "metadata.name")).toBe("web")
    expect(FieldSelector.exactValue(parsed("metadata.name!=web"), "metadata.name")).toBeUndefined()
  })
})
