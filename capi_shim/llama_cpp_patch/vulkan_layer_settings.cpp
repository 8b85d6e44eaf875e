// newrllama's patch of ggml's Vulkan instance creation (capi_shim/llama_cpp_patch/apply.py puts it in
// ggml/src/ggml-vulkan/ggml-vulkan.cpp, before ggml_vk_instance_init). llama.cpp asks the validation layer for its
// best-practice checks through VK_EXT_layer_settings, whose types came with the Vulkan headers 1.3.272; Debian 12
// ships 1.3.239 (libvulkan-dev), with which the backend did not compile, though nothing else in it needs newer
// headers. With older headers the instance is made without those settings: a validation layer, where one is
// installed and asked for, runs its default checks. Newer headers build what llama.cpp builds.
extern "C" const char newrllama_llama_cpp_patch_vulkan_layer_settings[] = "newrllama-llama-cpp-patch: vulkan-layer-settings";

static vk::Instance ggml_vk_create_instance(vk::InstanceCreateInfo info, bool layer_settings) {
#if VK_HEADER_VERSION >= 272
    VkBool32 enable_best_practice = layer_settings;
    std::vector<vk::LayerSettingEXT> settings = {
        {"VK_LAYER_KHRONOS_validation", "validate_best_practices", vk::LayerSettingTypeEXT::eBool32, 1,
         &enable_best_practice},
    };
    vk::LayerSettingsCreateInfoEXT layer_setting_info(settings);
    info.pNext = &layer_setting_info;
    return vk::createInstance(info);
#else
    (void) layer_settings;
    return vk::createInstance(info);
#endif
}

