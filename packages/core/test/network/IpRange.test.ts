import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as IpRange from "../../src/network/IpRange.js"

const range = (cidr: string) => Either.getOrThrow(IpRange.parse(cidr))

describe("IpRange.parse", () => {
  const cases: ReadonlyArray<[string, { cidr: string; family: IpRange.Family; prefix: number; size: bigint } | string]> = [
    ["10.96.0.0/12", { cidr: "10.96.0.0/12", family: "IPv4", prefix: 12, size: 1n << 20n }],
    ["10.96.0.1/12", { cidr: "10.96.0.0/12", family: "IPv4", prefix: 12, size: 1n << 20n }],
    ["192.168.1.7/28", { cidr: "192.168.1.0/28", family: "IPv4", prefix: 28, size: 16n }],
    ["10.0.0.5/32", { cidr: "10.0.0.5/32", family: "IPv4", prefix: 32, size: 1n }],
    ["10.0.0.5/31", { cidr: "10.0.0.4/31", family: "IPv4", prefix: 31, size: 2n }],
    ["0.0.0.0/0", { cidr: "0.0.0.0/0", family: "IPv4", prefix: 0, size: 1n << 32n }],
    ["fd00:10:96::/112", { cidr: "fd00:10:96::/112", family: "IPv6", prefix: 112, size: 65536n }],
    ["FD00:0010:0096:0000::1/64", { cidr: "fd00:10:96::/64", family: "IPv6", prefix: 64, size: 1n << 64n }],
    ["2001:db8::1/128", { cidr: "2001:db8::1/128", family: "IPv6", prefix: 128, size: 1n }],
    ["::/0", { cidr: "::/0", family: "IPv6", prefix: 0, size: 1n << 128n }],
    ["10.96.0.0", "invalid CIDR address: 10.96.0.0"],
    ["10.96.0.0/33", "invalid CIDR address: 10.96.0.0/33"],
    ["fd00::/129", "invalid CIDR address: fd00::/129"],
    ["10.96.0/12", "invalid CIDR address: 10.96.0/12"],
    ["10.96.0.0/-1", "invalid CIDR address: 10.96.0.0/-1"],
    ["10.96.0.0/1a", "invalid CIDR address: 10.96.0.0/1a"],
    ["nonsense", "invalid CIDR address: nonsense"]
  ]
  it.each(cases)("%s", (cidr, want) => {
    const parsed = IpRange.parse(cidr)
    if (typeof want === "string") expect(Either.isLeft(parsed) ? parsed.left : parsed.right).toBe(want)
    else {
      const r = Either.getOrThrow(parsed)
      expect({ cidr: r.cidr, family: r.family, prefix: r.prefix, size: r.size }).toEqual(want)
    }
  })
})

describe("IpRange offsets and addresses", () => {
  const cases: ReadonlyArray<[string, bigint, string | undefined]> = [
    ["10.96.0.0/12", 0n, "10.96.0.0"],
    ["10.96.0.0/12", 1n, "10.96.0.1"],
    ["10.96.0.0/12", 10n, "10.96.0.10"],
    ["10.96.0.0/12", 256n, "10.96.1.0"],
    ["10.96.0.0/12", (1n << 20n) - 1n, "10.111.255.255"],
    ["10.96.0.0/12", 1n << 20n, undefined],
    ["10.96.0.0/12", -1n, undefined],
    ["10.0.0.5/32", 0n, "10.0.0.5"],
    ["10.0.0.5/32", 1n, undefined],
    ["fd00:10:96::/112", 10n, "fd00:10:96::a"],
    ["fd00:10:96::/112", 0xffffn, "fd00:10:96::ffff"],
    ["fd00::/64", (1n << 64n) - 1n, "fd00::ffff:ffff:ffff:ffff"],
    ["fd00::/64", 1n << 16n, "fd00::1:0"],
    ["::/0", (1n << 128n) - 1n, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"]
  ]
  it.each(cases)("%s + %s", (cidr, offset, want) => {
    const r = range(cidr)
    expect(IpRange.addressAt(r, offset)).toBe(want)
    if (want !== undefined) expect(IpRange.offsetOf(r, want)).toBe(offset)
  })

  const membership: ReadonlyArray<[string, string, bigint | undefined]> = [
    ["10.96.0.0/12", "10.96.0.10", 10n],
    ["10.96.0.0/12", "10.096.000.010", 10n],
    ["10.96.0.0/12", "10.112.0.0", undefined],
    ["10.96.0.0/12", "10.95.255.255", undefined],
    ["10.96.0.0/12", "fd00::1", undefined],
    ["10.96.0.0/12", "not-an-ip", undefined],
    ["fd00:10:96::/112", "FD00:10:96:0::0010", 16n],
    ["fd00:10:96::/112", "fd00:10:97::1", undefined],
    ["fd00:10:96::/112", "10.96.0.1", undefined]
  ]
  it.each(membership)("%s holds %s at %s", (cidr, ip, want) => {
    expect(IpRange.offsetOf(range(cidr), ip)).toBe(want)
    expect(IpRange.contains(range(cidr), ip)).toBe(want !== undefined)
  })

  it("iterates addresses in order, clamped to the range", () => {
    expect([...IpRange.addresses(range("10.0.0.0/30"))]).toEqual(["10.0.0.0", "10.0.0.1", "10.0.0.2", "10.0.0.3"])
    expect([...IpRange.addresses(range("10.0.0.0/30"), 2n, 10n)]).toEqual(["10.0.0.2", "10.0.0.3"])
    expect([...IpRange.addresses(range("fd00::/127"))]).toEqual(["fd00::", "fd00::1"])
    expect([...IpRange.addresses(range("10.0.0.9/32"))]).toEqual(["10.0.0.9"])
  })

  it("canonicalizes addresses", () => {
    expect(IpRange.canonical("10.096.0.010")).toBe("10.96.0.10")
    expect(IpRange.canonical("FD00:0:0:0:0:0:0:1")).toBe("fd00::1")
    expect(IpRange.canonical("2001:db8:0:0:1:0:0:1")).toBe("2001:db8::1:0:0:1")
    expect(IpRange.canonical("bogus")).toBeUndefined()
    expect(IpRange.familyOf("fd00::1")).toBe("IPv6")
    expect(IpRange.familyOf("10.0.0.1")).toBe("IPv4")
  })
})

describe("IpRange.usable (what a Service range hands out)", () => {
  const cases: ReadonlyArray<[string, { first: bigint; last: bigint; count: bigint }]> = [
    ["10.96.0.0/12", { first: 1n, last: (1n << 20n) - 2n, count: (1n << 20n) - 2n }],
    ["10.0.0.0/28", { first: 1n, last: 14n, count: 14n }],
    ["10.0.0.0/30", { first: 1n, last: 2n, count: 2n }],
    ["10.0.0.0/31", { first: 1n, last: 0n, count: 0n }],
    ["10.0.0.0/32", { first: 1n, last: -1n, count: 0n }],
    ["fd00::/112", { first: 1n, last: 65535n, count: 65535n }],
    ["fd00::/127", { first: 1n, last: 1n, count: 1n }],
    ["fd00::/128", { first: 1n, last: 0n, count: 0n }]
  ]
  it.each(cases)("%s", (cidr, want) => expect(IpRange.usable(range(cidr))).toEqual(want))
})
