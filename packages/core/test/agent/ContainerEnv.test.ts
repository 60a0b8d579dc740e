import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as ContainerEnv from "../../src/agent/ContainerEnv.js"
import type * as Config from "../../src/model/Config.js"
import type * as Pod from "../../src/model/Pod.js"

const cm = (name: string, data: Record<string, string>): Config.ConfigMap => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: "default" }, data })
const secret = (name: string, data: Record<string, string>): Config.Secret => ({
  apiVersion: "v1",
  kind: "Secret",
  metadata: { name, namespace: "default" },
  data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, btoa(v)]))
})

const lookup: ContainerEnv.Lookup = {
  configMap: (name) => (name === "cfg" ? cm("cfg", { MODE: "prod", "bad key": "x", LEVEL: "debug" }) : undefined),
  secret: (name) => (name === "creds" ? secret("creds", { password: "s3cr3t", TOKEN: "t" }) : undefined)
}

const pod = (container: Partial<Pod.Container>): Pod.Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: "default", uid: "u1", labels: { app: "web", tier: "front" } },
  spec: { nodeName: "n1", serviceAccountName: "default", containers: [{ name: "app", image: "i", ...container }] }
})

const context: ContainerEnv.Context = { hostIP: "10.0.0.5", podIP: "10.0.0.5", nodeAllocatable: { cpu: "4", memory: "8Gi" }, initial: [{ name: "PORT", value: "31000" }] }

const resolve = (container: Partial<Pod.Container>) => {
  const p = pod(container)
  return ContainerEnv.resolve(p, p.spec.containers[0]!, lookup, context)
}

const asMap = (r: Either.Either<ReadonlyArray<ContainerEnv.EnvVar>, string>) => Either.map(r, (vars) => Object.fromEntries(vars.map((v) => [v.name, v.value])))

const cases: ReadonlyArray<[string, Partial<Pod.Container>, Either.Either<Record<string, string>, string>]> = [
  ["host ports come first", {}, Either.right({ PORT: "31000" })],
  ["a literal value expands earlier variables", { env: [{ name: "URL", value: "http://0.0.0.0:$(PORT)/$(NOPE)$$(PORT)" }] }, Either.right({ PORT: "31000", URL: "http://0.0.0.0:31000/$(NOPE)$(PORT)" })],
  ["a later variable overrides", { env: [{ name: "PORT", value: "8080" }] }, Either.right({ PORT: "8080" })],
  ["envFrom a ConfigMap with a prefix, invalid names skipped", { envFrom: [{ prefix: "CFG_", configMapRef: { name: "cfg" } }] }, Either.right({ PORT: "31000", CFG_MODE: "prod", CFG_LEVEL: "debug" })],
  ["envFrom a Secret (decoded)", { envFrom: [{ secretRef: { name: "creds" } }] }, Either.right({ PORT: "31000", password: "s3cr3t", TOKEN: "t" })],
  ["envFrom a missing optional ConfigMap", { envFrom: [{ configMapRef: { name: "gone", optional: true } }] }, Either.right({ PORT: "31000" })],
  ["envFrom a missing ConfigMap", { envFrom: [{ configMapRef: { name: "gone" } }] }, Either.left('configmap "gone" not found')],
  ["a ConfigMap key", { env: [{ name: "M", valueFrom: { configMapKeyRef: { name: "cfg", key: "MODE" } } }] }, Either.right({ PORT: "31000", M: "prod" })],
  ["a missing ConfigMap key", { env: [{ name: "M", valueFrom: { configMapKeyRef: { name: "cfg", key: "NOPE" } } }] }, Either.left("couldn't find key NOPE in ConfigMap default/cfg")],
  ["a missing optional key", { env: [{ name: "M", valueFrom: { configMapKeyRef: { name: "cfg", key: "NOPE", optional: true } } }] }, Either.right({ PORT: "31000" })],
  ["a Secret key", { env: [{ name: "P", valueFrom: { secretKeyRef: { name: "creds", key: "password" } } }] }, Either.right({ PORT: "31000", P: "s3cr3t" })],
  ["a missing Secret", { env: [{ name: "P", valueFrom: { secretKeyRef: { name: "nope", key: "password" } } }] }, Either.left('secret "nope" not found')],
  [
    "downward API fields",
    {
      env: [
        { name: "NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
        { name: "NODE", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
        { name: "IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
        { name: "APP", valueFrom: { fieldRef: { fieldPath: "metadata.labels['app']" } } },
        { name: "LABELS", valueFrom: { fieldRef: { fieldPath: "metadata.labels" } } }
      ]
    },
    Either.right({ PORT: "31000", NAME: "web", NODE: "n1", IP: "10.0.0.5", APP: "web", LABELS: 'app="web"\ntier="front"' })
  ],
  [
    "resource fields: a request, a limit defaulting to allocatable, a divisor",
    {
      resources: { requests: { cpu: "250m", memory: "64Mi" } },
      env: [
        { name: "CPU_REQ", valueFrom: { resourceFieldRef: { resource: "requests.cpu" } } },
        { name: "CPU_LIM", valueFrom: { resourceFieldRef: { resource: "limits.cpu" } } },
        { name: "MEM_MI", valueFrom: { resourceFieldRef: { resource: "requests.memory", divisor: "1Mi" } } }
      ]
    },
    Either.right({ PORT: "31000", CPU_REQ: "1", CPU_LIM: "4", MEM_MI: "64" })
  ]
]

describe("ContainerEnv.resolve", () => {
  it.each(cases)("%s", (_name, container, want) => {
    expect(asMap(resolve(container))).toEqual(want)
  })

  it("expands $(VAR) in command and args", () => {
    const line = ContainerEnv.commandLine({ name: "a", image: "i", command: ["node", "$(APP)"], args: ["--port=$(PORT)", "$$(PORT)"] }, [
      { name: "PORT", value: "31000" },
      { name: "APP", value: "server.js" }
    ])
    expect(line).toEqual({ command: ["node", "server.js"], args: ["--port=31000", "$(PORT)"] })
  })

  it("lists what a container refers to", () => {
    expect(
      ContainerEnv.references({
        name: "a",
        image: "i",
        envFrom: [{ configMapRef: { name: "cfg" } }],
        env: [{ name: "x", valueFrom: { secretKeyRef: { name: "creds", key: "k" } } }]
      })
    ).toEqual({ configMaps: ["cfg"], secrets: ["creds"] })
  })
})
