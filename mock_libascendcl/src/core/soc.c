/*
 * soc.c - the product family of the simulated SoC (ASCEND_MOCK_SOC_NAME), for the
 * per-product support matrices of the API reference (acl_next_semantics.md §0:
 * 950 = Ascend 950PR/950DT, A3 = Atlas A3, A2 = Atlas A2, 310B, 310P, 910 = Atlas
 * training series). A SoC name the mock does not know is an Atlas A2 part, like the
 * device profile of device.c ("anything else uses the 910B1 profile").
 */
#include <string.h>

#include "core/core.h"

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

core_soc_family core_soc_family_get(void)
{
    const char *soc = core_config_get()->soc_name;
    if (starts_with(soc, "Ascend950") || starts_with(soc, "Ascend910_95")) {
        return strstr(soc, "DT") != NULL ? CORE_SOC_950DT : CORE_SOC_950PR;
    }
    if (starts_with(soc, "Ascend910_93")) {
        return CORE_SOC_A3;
    }
    if (starts_with(soc, "Ascend910B")) {
        return CORE_SOC_A2;
    }
    if (starts_with(soc, "Ascend310P")) {
        return CORE_SOC_310P;
    }
    if (starts_with(soc, "Ascend310B")) {
        return CORE_SOC_310B;
    }
    if (starts_with(soc, "Ascend910")) {
        return CORE_SOC_910;
    }
    return CORE_SOC_A2;
}

const char *core_soc_family_name(core_soc_family f)
{
    switch (f) {
    case CORE_SOC_950PR:
        return "Ascend 950PR";
    case CORE_SOC_950DT:
        return "Ascend 950DT";
    case CORE_SOC_A3:
        return "Atlas A3";
    case CORE_SOC_A2:
        return "Atlas A2";
    case CORE_SOC_310P:
        return "Atlas inference series (310P)";
    case CORE_SOC_310B:
        return "Atlas 200I/500 A2 (310B)";
    case CORE_SOC_910:
        return "Atlas training series (910)";
    }
    return "unknown";
}

aclError core_soc_require(const char *fn, unsigned supported)
{
    core_soc_family f = core_soc_family_get();
    if ((supported & CORE_SOC_BIT(f)) != 0) {
        return ACL_SUCCESS;
    }
    return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "not supported on %s (%s, ASCEND_MOCK_SOC_NAME)",
                      core_config_get()->soc_name, core_soc_family_name(f));
}
