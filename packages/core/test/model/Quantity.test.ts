import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { Decode, Quantity } from "../../src/model/index.js"

const q = (s: string): Quantity.Quantity => {
  const r = Quantity.parse(s)
  if (Either.isLeft(r)) throw new Error(r.left.message)
  return r.right
}

describe("Quantity.parse", () => {
  it.each([
    ["100m", 100_000_000n],
    ["0.5", 500_000_000n],
    ["1", 1_000_000_000n],
    ["1n", 1n],
    ["1u", 1_000n],
    ["1k", 1_000n * 1_000_000_000n],
    ["1M", 10n ** 15n],
    ["1G", 10n ** 18n],
    ["1T", 10n ** 21n],
    ["1P", 10n ** 24n],
    ["1E", 10n ** 27n],
    ["1Ki", 1024n * 10n ** 9n],
    ["1Mi", 1024n ** 2n * 10n ** 9n],
    ["1Gi", 1024n ** 3n * 10n ** 9n],
    ["1Ti", 1024n ** 4n * 10n ** 9n],
    ["1Pi", 1024n ** 5n * 10n ** 9n],
    ["1Ei", 1024n ** 6n * 10n ** 9n],
    ["1e3", 1000n * 10n ** 9n],
    ["1E-3", 1_000_000n],
    ["1e+2", 100n * 10n ** 9n],
    ["+1.5Gi", 1610612736n * 10n ** 9n],
    ["-2", -2n * 10n ** 9n],
    [".5", 500_000_000n],
    ["5.", 5n * 10n ** 9n],
    ["0", 0n],
    // Below nano precision rounds up (away from zero), as Kubernetes does.
    ["0.1n", 1n],
    ["1e-10", 1n],
    ["-0.1n", -1n],
    ["1.0000000001", 1_000_000_001n]
  ])("%s = %s nanos", (input, nanos) => {
    expect(q(input).nanos).toBe(nanos)
  })

  it.each(["1.5.5", "Gi", "1Gb", "", ".", "+", "1K", "1e", "1 ", " 1", "1ki", "abc", "1e1001", "--1", "1i"])(
    "rejects %j with a typed error naming the input",
    (input) => {
      const r = Quantity.parse(input)
      expect(Either.isLeft(r)).toBe(true)
      if (Either.isLeft(r)) {
        expect(r.left._tag).toBe("QuantityParseError")
        expect(r.left.input).toBe(input)
        expect(r.left.message).toContain(JSON.stringify(input))
      }
    }
  )

  it("records the notation", () => {
    expect(q("1Gi").format).toBe("BinarySI")
    expect(q("1G").format).toBe("DecimalSI")
    expect(q("12").format).toBe("DecimalSI")
    expect(q("1e3").format).toBe("DecimalExponent")
  })
})

describe("Quantity.compare / add / sub", () => {
  it.each([
    ["1Gi", "1073741824", 0],
    ["500m", "0.5", 0],
    ["1.5Gi", "1536Mi", 0],
    ["1k", "1e3", 0],
    ["1Ki", "1k", 1],
    ["999m", "1", -1],
    ["-1", "0", -1],
    ["1E", "1Ei", -1],
    ["1n", "0", 1]
  ])("compare(%s, %s) = %d", (a, b, expected) => {
    expect(Quantity.compare(q(a), q(b))).toBe(expected)
    expect(Quantity.compare(q(b), q(a))).toBe(-expected === 0 ? 0 : -expected)
  })

  it("adds and subtracts exactly, keeping the left operand's notation", () => {
    expect(Quantity.format(Quantity.add(q("1Gi"), q("512Mi")))).toBe("1536Mi")
    expect(Quantity.format(Quantity.add(q("100m"), q("0.9")))).toBe("1")
    expect(Quantity.format(Quantity.sub(q("1"), q("1n")))).toBe("999999999n")
    expect(Quantity.format(Quantity.sub(q("250m"), q("1")))).toBe("-750m")
    // 0.1 + 0.2 is exact here, unlike floating point.
    expect(Quantity.equals(Quantity.add(q("0.1"), q("0.2")), q("0.3"))).toBe(true)
  })
})

describe("Quantity.toMilli / toUnits", () => {
  it.each([
    ["100m", 100],
    ["1", 1000],
    ["0.5", 500],
    ["1n", 1], // rounds up: a non-zero request never becomes zero
    ["-1n", -1],
    ["2Ki", 2048000]
  ])("toMilli(%s) = %d", (input, milli) => {
    expect(Quantity.toMilli(q(input))).toBe(milli)
  })

  it("toUnits rounds up", () => {
    expect(Quantity.toUnits(q("1Gi"))).toBe(1073741824)
    expect(Quantity.toUnits(q("100m"))).toBe(1)
  })

  it("builds from milli and units", () => {
    expect(Quantity.format(Quantity.fromMilli(1500))).toBe("1500m")
    expect(Quantity.format(Quantity.fromUnits(2048, "BinarySI"))).toBe("2Ki")
  })
})

describe("Quantity.format (canonical, as Kubernetes serialises)", () => {
  it.each([
    ["1500m", "1500m"],
    ["1024Mi", "1Gi"],
    ["1000m", "1"],
    ["1.5", "1500m"],
    ["0.5", "500m"],
    ["1.5Gi", "1536Mi"],
    ["0.5Ki", "512"],
    ["1536", "1536"],
    ["1000", "1k"],
    ["1500", "1500"],
    ["15000", "15k"],
    ["1e3", "1e3"],
    ["1E-3", "1e-3"],
    ["1.5e3", "1500"],
    ["0", "0"],
    ["0Gi", "0"],
    ["+1.5Gi", "1536Mi"],
    ["-2", "-2"],
    ["-1Gi", "-1Gi"],
    ["100u", "100u"],
    ["0.1n", "1n"],
    ["1000E", "1000E"],
    ["1024Ei", "1024Ei"],
    ["1Ki", "1Ki"],
    ["1025Ki", "1025Ki"]
  ])("%s → %s", (input, canonical) => {
    expect(Quantity.format(q(input))).toBe(canonical)
  })

  it("round-trips: parse(format(q)) equals q", () => {
    for (const s of ["1500m", "1.5Gi", "7e-2", "123456789n", "3Ti", "-0.25", "42"]) {
      expect(Quantity.equals(q(Quantity.format(q(s))), q(s))).toBe(true)
    }
  })
})

describe("QuantitySchema", () => {
  it("accepts strings and numbers and canonicalises them", () => {
    expect(Decode.decodeObject(Quantity.ResourceList, { cpu: 0.5, memory: "1024Mi", pods: 110 })).toEqual(
      Either.right({ cpu: "500m", memory: "1Gi", pods: "110" })
    )
  })

  it("rejects bad quantities at the resource's key", () => {
    expect(Decode.decodeObject(Quantity.ResourceList, { cpu: "1.5.5", memory: true })).toEqual(
      Either.left([
        { path: "[cpu]", message: 'Invalid value: "1.5.5": unable to parse numeric part of quantity' },
        { path: "[memory]", message: "Invalid value: true: expected string or number" }
      ])
    )
  })
})
