# set_env.sh - the environment of this CANN-shaped install of mock_libascendcl, a host
# simulator of the CANN runtime. Source it from bash or zsh, as CANN's own:
#
#     source <prefix>/set_env.sh
#
# Like CANN's set_env.sh it exports ASCEND_HOME_PATH and ASCEND_TOOLKIT_HOME (both the
# prefix), ASCEND_OPP_PATH (<prefix>/opp), ASCEND_AICPU_PATH (the prefix) and
# TOOLCHAIN_HOME (<prefix>/toolkit), and puts <prefix>/lib64 first on LD_LIBRARY_PATH and
# <prefix>/bin first on PATH. Every path is computed from where this file is, so the
# prefix can be moved or copied; sourcing it again adds nothing twice.

if [ -n "${BASH_VERSION:-}" ]; then
    eval '_mock_cann_script="${BASH_SOURCE[0]}"'
elif [ -n "${ZSH_VERSION:-}" ]; then
    eval '_mock_cann_script="${(%):-%x}"'
else
    _mock_cann_script=""
fi
if [ -z "${_mock_cann_script}" ]; then
    echo "set_env.sh: source this file from bash or zsh (its location is needed)" >&2
    unset _mock_cann_script
    return 1 2>/dev/null || exit 1
fi
_mock_cann_home="$(cd "$(dirname "${_mock_cann_script}")" && pwd -P)"

# _mock_cann_prepend VAR DIR: DIR first on the colon-separated list VAR, unless present.
_mock_cann_prepend() {
    eval "_mock_cann_value=\"\${$1:-}\""
    case ":${_mock_cann_value}:" in
    *":$2:"*) ;;
    *)
        if [ -n "${_mock_cann_value}" ]; then
            eval "export $1=\"\$2:\${_mock_cann_value}\""
        else
            eval "export $1=\"\$2\""
        fi
        ;;
    esac
    unset _mock_cann_value
}

export ASCEND_HOME_PATH="${_mock_cann_home}"
export ASCEND_TOOLKIT_HOME="${_mock_cann_home}"
export ASCEND_OPP_PATH="${_mock_cann_home}/opp"
export ASCEND_AICPU_PATH="${_mock_cann_home}"
export TOOLCHAIN_HOME="${_mock_cann_home}/toolkit"
_mock_cann_prepend LD_LIBRARY_PATH "${_mock_cann_home}/lib64"
_mock_cann_prepend PATH "${_mock_cann_home}/bin"

unset -f _mock_cann_prepend
unset _mock_cann_script _mock_cann_home
