# setenv.bash - the environment of this CANN-shaped install of mock_libascendcl, under the
# name older CANN toolkits use (<toolkit>/bin/setenv.bash). Source it from bash or zsh:
#
#     source <prefix>/bin/setenv.bash
#
# It sources <prefix>/set_env.sh, which computes every path from its own location.
if [ -n "${BASH_VERSION:-}" ]; then
    eval '_mock_cann_bin="${BASH_SOURCE[0]}"'
elif [ -n "${ZSH_VERSION:-}" ]; then
    eval '_mock_cann_bin="${(%):-%x}"'
else
    _mock_cann_bin=""
fi
if [ -z "${_mock_cann_bin}" ]; then
    echo "setenv.bash: source this file from bash or zsh (its location is needed)" >&2
    unset _mock_cann_bin
    return 1 2>/dev/null || exit 1
fi
_mock_cann_bin="$(cd "$(dirname "${_mock_cann_bin}")" && pwd -P)"
. "${_mock_cann_bin}/../set_env.sh"
unset _mock_cann_bin
