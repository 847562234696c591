# Sourced by the scripts: puts the CUDA toolkit on PATH when it is installed.
if [ -x /usr/local/cuda/bin/nvcc ]; then
  case ":$PATH:" in *":/usr/local/cuda/bin:"*) ;; *) export PATH="/usr/local/cuda/bin:$PATH" ;; esac
fi
