import { describe, expect, it } from "vitest"
import * as ListenAddress from "../src/internal/listenAddress.js"
import * as MetricsServer from "../src/observability/MetricsServer.js"
import * as Server from "../src/Server.js"

describe("the listen flags' HOST:PORT", () => {
  const cases: ReadonlyArray<readonly [string, boolean, { host: string; port: number } | undefined]> = [
    ["127.0.0.1:9300", false, { host: "127.0.0.1", port: 9300 }],
    [":9300", false, { host: "0.0.0.0", port: 9300 }],
    ["[::1]:80", false, { host: "::1", port: 80 }],
    ["localhost:0", false, { host: "localhost", port: 0 }],
    ["9300", true, { host: "0.0.0.0", port: 9300 }],
    ["9300", false, undefined],
    ["host:70000", false, undefined],
    ["::1:80", false, undefined],
    ["host:", false, undefined],
    ["", true, undefined]
  ]
  it.each(cases)("%j (bare port %s) → %j", (text, barePort, want) => {
    expect(ListenAddress.parse(text, { barePort })).toEqual(want)
  })

  it("--listen takes a bare port, --metrics-listen does not, and both name the flag when refusing", () => {
    expect(Server.parseListen("9300")).toMatchObject({ _tag: "Right", right: { host: "0.0.0.0", port: 9300 } })
    const listen = Server.parseListen("nope")
    expect(listen._tag === "Left" && listen.left.message).toBe('--listen "nope": expected HOST:PORT')
    const metrics = MetricsServer.parseListen("9302")
    expect(metrics._tag === "Left" && metrics.left.message).toBe('--metrics-listen "9302": expected ADDR:PORT or off')
    expect(MetricsServer.parseListen(":9302")).toMatchObject({ _tag: "Right", right: { host: "0.0.0.0", port: 9302, explicit: true } })
    expect(MetricsServer.parseListen("off")).toMatchObject({ _tag: "Right", right: undefined })
  })
})
