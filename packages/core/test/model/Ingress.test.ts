import { describe, expect, it } from "@effect/vitest"
import * as Ingress from "../../src/model/Ingress.js"

const ing = (spec: Record<string, unknown>): Ingress.Ingress => ({ apiVersion: "networking.k8s.io/v1", kind: "Ingress", metadata: { name: "hello" }, spec }) as Ingress.Ingress
const svc = (port: Record<string, unknown> = { number: 80 }) => ({ service: { name: "hello", port } })

describe("Ingress.validate", () => {
  it.each([
    ["a rule with a Prefix path to a Service port number", { rules: [{ host: "hello.local", http: { paths: [{ path: "/", pathType: "Prefix", backend: svc() }] } }] }, []],
    ["a default backend alone", { defaultBackend: svc({ name: "http" }) }, []],
    ["a wildcard host", { rules: [{ host: "*.example.com", http: { paths: [{ path: "/", pathType: "Exact", backend: svc() }] } }] }, []],
    ["neither rules nor a default backend", {}, ["spec.rules"]],
    ["a path without pathType", { rules: [{ http: { paths: [{ path: "/", backend: svc() }] } }] }, ["spec.rules[0].http.paths[0].pathType"]],
    ["a relative Prefix path", { rules: [{ http: { paths: [{ path: "api", pathType: "Prefix", backend: svc() }] } }] }, ["spec.rules[0].http.paths[0].path"]],
    ["a port with name and number", { defaultBackend: svc({ name: "http", number: 80 }) }, ["spec.defaultBackend.service.port"]],
    ["a port with neither", { defaultBackend: svc({}) }, ["spec.defaultBackend.service.port"]],
    ["an IP as host", { rules: [{ host: "10.0.0.1", http: { paths: [{ path: "/", pathType: "Prefix", backend: svc() }] } }] }, ["spec.rules[0].host"]],
    ["both service and resource", { defaultBackend: { ...svc(), resource: { kind: "Bucket", name: "b" } } }, ["spec.defaultBackend"]]
  ])("%s", (_name, spec, paths) => {
    expect(Ingress.validate(ing(spec)).map((e) => e.path)).toEqual(paths)
  })
})
