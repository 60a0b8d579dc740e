/**
 * The pure parts of pulling: auth challenges, registries.yaml, endpoint choice, platform choice
 * in an index, the image config a container merges, and which layer entries are whiteouts.
 */
import { describe, expect, it } from "vitest"
import * as ImagePuller from "../../src/box/ImagePuller.js"
import { parseReference } from "../../src/box/Images.js"
import * as LayerUnpack from "../../src/box/LayerUnpack.js"
import { parseChallenge } from "../../src/box/RegistryClient.js"
import * as RegistryConfig from "../../src/box/RegistryConfig.js"

describe("parseChallenge", () => {
  it.each([
    ['Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull"', { scheme: "bearer", params: { realm: "https://auth.docker.io/token", service: "registry.docker.io", scope: "repository:library/busybox:pull" } }],
    ['Basic realm="fleet-test"', { scheme: "basic", params: { realm: "fleet-test" } }],
    ["Bearer realm=https://r.io/t, service=r.io", { scheme: "bearer", params: { realm: "https://r.io/t", service: "r.io" } }],
    ['Bearer realm="a\\"b"', { scheme: "bearer", params: { realm: 'a"b' } }]
  ])("%s", (header, parsed) => {
    expect(parseChallenge(header)).toEqual(parsed)
  })

  it("nothing to parse", () => {
    expect(parseChallenge(undefined)).toBeUndefined()
    expect(parseChallenge("")).toBeUndefined()
  })
})

describe("registries.yaml", () => {
  const files: Record<string, string> = { "/ca.pem": "-----BEGIN CERTIFICATE-----\n" }
  const read = (p: string) => {
    const f = files[p]
    if (f === undefined) throw new Error("ENOENT")
    return f
  }

  it("reads mirrors, credentials (plain or base64 auth) and TLS settings as k3s does", () => {
    const c = RegistryConfig.parseText(
      `mirrors:
  docker.io:
    endpoint: ["https://mirror.internal"]
  "10.0.0.5:5000":
    endpoint:
      - "http://10.0.0.5:5000"
configs:
  "10.0.0.5:5000":
    auth: { username: u, password: p }
    tls: { ca_file: /ca.pem }
  "reg.io":
    auth: { auth: ${Buffer.from("v:w:x").toString("base64")} }
    tls: { insecure_skip_verify: true }
`,
      read
    )
    if (typeof c === "string") throw new Error(c)
    expect(RegistryConfig.endpointsFor(c, "docker.io")).toEqual(["https://mirror.internal", "https://registry-1.docker.io"])
    expect(RegistryConfig.endpointsFor(c, "10.0.0.5:5000")).toEqual(["http://10.0.0.5:5000", "https://10.0.0.5:5000"])
    expect(RegistryConfig.endpointsFor(c, "ghcr.io")).toEqual(["https://ghcr.io"])
    expect(RegistryConfig.authFor(c, "10.0.0.5:5000")).toEqual([{ username: "u", password: "p" }])
    expect(RegistryConfig.authFor(c, "reg.io")).toEqual([{ username: "v", password: "w:x" }])
    expect(RegistryConfig.tlsFor(c, "10.0.0.5:5000")).toEqual({ ca: files["/ca.pem"], insecureSkipVerify: false })
    expect(RegistryConfig.tlsFor(c, "reg.io")).toEqual({ insecureSkipVerify: true })
    expect(RegistryConfig.tlsFor(c, "other.io")).toEqual({ insecureSkipVerify: false })
  })

  it('a "*" mirror serves every registry', () => {
    const c = RegistryConfig.parseText(`mirrors:\n  "*":\n    endpoint: ["https://cache.internal"]\n`)
    if (typeof c === "string") throw new Error(c)
    expect(RegistryConfig.endpointsFor(c, "quay.io")).toEqual(["https://cache.internal", "https://quay.io"])
  })

  it.each([
    ["mirrors:\n  docker.io:\n    endpoint: mirror.internal\n", /mirrors.docker.io.endpoint/],
    ["mirrors:\n  docker.io:\n    endpoint: [ftp://x]\n", /http:\/\/ or https:\/\//],
    ["configs:\n  r.io:\n    tls: { ca_file: /missing.pem }\n", /configs.r.io.tls.ca_file: \/missing.pem cannot be read/],
    ["configs:\n  r.io:\n    auth: { auth: bm9jb2xvbg== }\n", /username:password/],
    ["mirrors: [\n", /not YAML/]
  ])("refuses %j", (text, message) => {
    expect(RegistryConfig.parseText(text, read)).toMatch(message)
  })

  it("an absent file is no configuration", () => {
    expect(RegistryConfig.load("/nonexistent/registries.yaml")).toEqual(RegistryConfig.empty)
    expect(RegistryConfig.load(undefined)).toEqual(RegistryConfig.empty)
  })
})

describe("references with a registry host", () => {
  it.each([
    ["127.0.0.1:5000/busybox:1", { name: "127.0.0.1:5000/busybox", tagged: "127.0.0.1:5000/busybox:1" }],
    ["127.0.0.1:5000/busybox", { name: "127.0.0.1:5000/busybox", tagged: "127.0.0.1:5000/busybox:latest" }],
    [`reg.io/a/b@sha256:${"c".repeat(64)}`, { name: "reg.io/a/b", digest: `sha256:${"c".repeat(64)}` }],
    ["busybox", { name: "busybox", tagged: "busybox:latest" }]
  ])("%s", (ref, parsed) => {
    expect(parseReference(ref)).toEqual(parsed)
  })

  it("refuses malformed ones", () => {
    expect(typeof parseReference("UPPER/Case:1")).toBe("string")
    expect(typeof parseReference("busybox@sha256:short")).toBe("string")
  })
})

describe("choosePlatform", () => {
  const d = (architecture: string, variant?: string, os = "linux") => ({ digest: `sha256:${architecture}${variant ?? ""}`, size: 1, platform: { os, architecture, ...(variant === undefined ? {} : { variant }) } })
  it.each([
    ["amd64 among others", [d("arm64", "v8"), d("amd64")], { os: "linux", architecture: "amd64" }, "sha256:amd64"],
    ["the exact variant first", [d("arm", "v6"), d("arm", "v7")], { os: "linux", architecture: "arm", variant: "v7" }, "sha256:armv7"],
    ["any variant when none is exact", [d("arm64", "v8")], { os: "linux", architecture: "arm64" }, "sha256:arm64v8"],
    ["not an attestation entry", [d("unknown", undefined, "unknown"), d("amd64")], { os: "linux", architecture: "amd64" }, "sha256:amd64"],
    ["none for another OS", [d("amd64", undefined, "windows")], { os: "linux", architecture: "amd64" }, undefined]
  ])("%s", (_why, manifests, platform, digest) => {
    expect(ImagePuller.choosePlatform(manifests, platform)?.digest).toBe(digest)
  })
})

describe("configOf", () => {
  it("takes the fields a container merges, and ignores malformed ones", () => {
    expect(ImagePuller.configOf({ config: { Entrypoint: ["/e"], Cmd: ["c"], Env: ["A=1"], WorkingDir: "/w", User: "10:20", ExposedPorts: { "80/tcp": {} } } })).toEqual({
      entrypoint: ["/e"],
      cmd: ["c"],
      env: ["A=1"],
      workingDir: "/w",
      user: "10:20"
    })
    expect(ImagePuller.configOf({ config: { Entrypoint: "not a list", Cmd: [1], WorkingDir: "" } })).toEqual({})
    expect(ImagePuller.configOf({})).toEqual({})
  })
})

describe("whiteoutsOf", () => {
  it.each([
    [["etc/.wh.motd", "etc/hosts"], { removed: ["etc/motd"], opaque: [] }],
    [["./etc/old/.wh..wh..opq", "etc/old/c"], { removed: [], opaque: ["etc/old"] }],
    [[".wh..wh..opq"], { removed: [], opaque: [""] }],
    [["/abs/.wh.x"], { removed: ["abs/x"], opaque: [] }],
    [["../.wh.escape", "a/../../.wh.b"], { removed: [], opaque: [] }],
    [[".wh.top"], { removed: ["top"], opaque: [] }]
  ])("%j", (paths, whiteouts) => {
    expect(LayerUnpack.whiteoutsOf(paths)).toEqual(whiteouts)
  })
})
