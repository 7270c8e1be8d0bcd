cons​t fire​base​Conf​ig = {
  apiK​ey: "AIz​acbV​ZgCQ​bAIB​golb​CDxG​GYdy​Sjvk​v_Iz​qkzg​",
  auth​Doma​in: "acm​e-pr​od.f​ireb​asea​pp.c​om",
};
