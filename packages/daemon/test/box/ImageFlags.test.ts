/** The box's image flags: where registries.yaml is read from, and the image GC thresholds. */
import { describe, expect, it } from "vitest"
import * as Box from "../../src/box/Box.js"

describe("box image flags", () => {
  it("defaults: registries.yaml beside the data, GC at 85% down to 80% as the kubelet", () => {
    const c = Box.parseFlags(["--data-dir", "/tmp/x"])
    if (typeof c === "string") throw new Error(c)
    expect(c.registries).toMatch(/registries\.yaml$/)
    expect(c.imageGc).toEqual({ highPercent: 85, lowPercent: 80 })
  })

  it("takes a file and thresholds", () => {
    const c = Box.parseFlags(["--registries", "/etc/fleet/registries.yaml", "--image-gc-high-threshold", "90", "--image-gc-low-threshold", "70"])
    if (typeof c === "string") throw new Error(c)
    expect(c.registries).toBe("/etc/fleet/registries.yaml")
    expect(c.imageGc).toEqual({ highPercent: 90, lowPercent: 70 })
  })

  it.each([
    [["--image-gc-high-threshold", "101"], '--image-gc-high-threshold "101": expected a percentage 0..100'],
    [["--image-gc-low-threshold", "x"], '--image-gc-low-threshold "x": expected a percentage 0..100'],
    [["--image-gc-high-threshold", "50", "--image-gc-low-threshold", "60"], "--image-gc-low-threshold 60 must not be above --image-gc-high-threshold 50"]
  ])("refuses %j", (args, message) => {
    expect(Box.parseFlags(args)).toBe(message)
  })
})
