import semver from "semver";
globalThis.middleware.userMessageInbound = async (c) => {
  const versions = c.text.split(" ");
  return [semver.maxSatisfying(versions, "^1.2.0"), semver.sort([...versions]).join(","),
    String(semver.satisfies("2.0.0-rc.1", ">=1.0.0")), semver.inc("1.9.9", "minor")].join(" | ");
};
